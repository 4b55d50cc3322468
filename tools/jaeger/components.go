// The components of the Jaeger that loadlab's trace test runs: the OTLP receiver, Jaeger's
// storage and query extensions and its storage exporter. scripts/install-jaeger.sh puts this
// file in place of cmd/jaeger/internal/components.go in a copy of Jaeger's source before it
// builds `jaeger`: the test uses none of the full program's other receivers, processors,
// exporters and extensions (Kafka, Prometheus, Zipkin, tail sampling, AWS auth, ...), which
// cost a quarter of its build (434 s from an empty Go cache on two cores, 327 s without them).
package internal

import (
	"go.opentelemetry.io/collector/otelcol"
	"go.opentelemetry.io/collector/receiver/otlpreceiver"
	"go.opentelemetry.io/collector/service/telemetry/otelconftelemetry"

	"github.com/jaegertracing/jaeger/cmd/jaeger/internal/exporters/storageexporter"
	"github.com/jaegertracing/jaeger/cmd/jaeger/internal/extension/jaegerquery"
	"github.com/jaegertracing/jaeger/cmd/jaeger/internal/extension/jaegerstorage"
)

// Components lists the factories the program is built with.
func Components() (otelcol.Factories, error) {
	extensions, err := otelcol.MakeFactoryMap(jaegerstorage.NewFactory(), jaegerquery.NewFactory())
	if err != nil {
		return otelcol.Factories{}, err
	}
	receivers, err := otelcol.MakeFactoryMap(otlpreceiver.NewFactory())
	if err != nil {
		return otelcol.Factories{}, err
	}
	exporters, err := otelcol.MakeFactoryMap(storageexporter.NewFactory())
	if err != nil {
		return otelcol.Factories{}, err
	}
	return otelcol.Factories{
		Telemetry:  otelconftelemetry.NewFactory(),
		Extensions: extensions,
		Receivers:  receivers,
		Exporters:  exporters,
	}, nil
}
