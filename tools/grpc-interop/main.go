// Command grpc-interop-reflect serves grpc-go's own interop TestService (interop.NewTestServer,
// the implementation behind google.golang.org/grpc/interop/server) on 127.0.0.1 with grpc-go's
// server reflection, so loadlab's tests can call the interop cases by reflection as well as
// from descriptors; with -tls_cert and -tls_key it serves over TLS (grpcs). With -protoset FILE
// it writes the TestService's FileDescriptorSet (its files and their imports, as grpc-go
// compiled them) and exits.
package main

import (
	"flag"
	"fmt"
	"log"
	"net"
	"os"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/interop"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/reflection"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/descriptorpb"
)

func main() {
	port := flag.Int("port", 0, "port on 127.0.0.1 (0: any free one, printed on stdout)")
	protoset := flag.String("protoset", "", "write the TestService's FileDescriptorSet here and exit")
	cert := flag.String("tls_cert", "", "serve over TLS with this PEM certificate (and -tls_key)")
	key := flag.String("tls_key", "", "the PEM private key of -tls_cert")
	flag.Parse()
	if *protoset != "" {
		if err := writeProtoset(*protoset); err != nil {
			log.Fatal(err)
		}
		return
	}
	lis, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", *port))
	if err != nil {
		log.Fatal(err)
	}
	var options []grpc.ServerOption
	if *cert != "" {
		creds, err := credentials.NewServerTLSFromFile(*cert, *key)
		if err != nil {
			log.Fatal(err)
		}
		options = append(options, grpc.Creds(creds))
	}
	server := grpc.NewServer(options...)
	testgrpc.RegisterTestServiceServer(server, interop.NewTestServer())
	reflection.Register(server)
	fmt.Println(lis.Addr().(*net.TCPAddr).Port)
	if err := server.Serve(lis); err != nil {
		log.Fatal(err)
	}
}

// writeProtoset writes the file that declares grpc.testing.TestService and every file it
// imports, imports first, as one FileDescriptorSet.
func writeProtoset(path string) error {
	var set descriptorpb.FileDescriptorSet
	seen := map[string]bool{}
	var add func(f protoreflect.FileDescriptor)
	add = func(f protoreflect.FileDescriptor) {
		if seen[f.Path()] {
			return
		}
		seen[f.Path()] = true
		imports := f.Imports()
		for i := 0; i < imports.Len(); i++ {
			add(imports.Get(i).FileDescriptor)
		}
		set.File = append(set.File, protodesc.ToFileDescriptorProto(f))
	}
	add(testgrpc.File_grpc_testing_test_proto)
	bytes, err := proto.Marshal(&set)
	if err != nil {
		return err
	}
	return os.WriteFile(path, bytes, 0o644)
}
