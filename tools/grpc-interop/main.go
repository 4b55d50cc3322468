// Command grpc-interop-reflect serves grpc-go's own interop TestService (interop.NewTestServer,
// the implementation behind google.golang.org/grpc/interop/server) on 127.0.0.1 with grpc-go's
// server reflection, so loadlab's tests can call the interop cases by reflection as well as
// from descriptors. With -protoset FILE it writes the TestService's FileDescriptorSet (its
// files and their imports, as grpc-go compiled them) and exits.
package main

import (
	"flag"
	"fmt"
	"log"
	"net"
	"os"

	"google.golang.org/grpc"
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
	server := grpc.NewServer()
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
