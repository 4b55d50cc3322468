//! A method's types from `.proto` files, compiled in Rust (protox, so no `protoc` is needed),
//! and its messages to and from gRPC's JSON mapping (prost-reflect's dynamic messages).

use std::path::{Path, PathBuf};

use prost::Message as _;
use prost_reflect::{DescriptorPool, DynamicMessage, MessageDescriptor};

/// A method that cannot be found or called as asked.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MethodError {
    /// `.proto` files that do not compile.
    #[error("{0}")]
    Compile(String),
    /// No such service.
    #[error("no service {service} in {from}; its services: {known}")]
    NoService {
        /// The service asked for.
        service: String,
        /// Where the types came from.
        from: String,
        /// The services there.
        known: String,
    },
    /// The service has no such method.
    #[error("service {service} in {from} has no method {method}; its methods: {known}")]
    NoMethod {
        /// The service.
        service: String,
        /// Where the types came from.
        from: String,
        /// The method asked for.
        method: String,
        /// The service's methods.
        known: String,
    },
    /// A request that is not the method's input in JSON.
    #[error("the request is not a {message} in JSON: {reason}")]
    Request {
        /// The input message's full name.
        message: String,
        /// What is wrong.
        reason: String,
    },
    /// A response that does not decode as the method's output.
    #[error("a response that is not a {message}: {reason}")]
    Response {
        /// The output message's full name.
        message: String,
        /// What is wrong.
        reason: String,
    },
}

/// The message and service types a call may use.
#[derive(Debug, Clone)]
pub struct Protos {
    pool: DescriptorPool,
    /// Where they came from, for messages (`hello.proto`, `server reflection`).
    from: String,
}

/// One method: its path and types.
#[derive(Debug, Clone)]
pub struct Method {
    /// `/package.Service/Method`.
    pub path: String,
    /// The request's type.
    pub input: MessageDescriptor,
    /// The response's type.
    pub output: MessageDescriptor,
    /// The client sends a stream of messages.
    pub client_streaming: bool,
    /// The server answers with a stream of messages.
    pub server_streaming: bool,
}

impl Protos {
    /// Compiles `files` with their imports, looked up in `imports` and then in each file's own
    /// directory (as `protoc -I` would need spelled out); the well-known types
    /// (`google/protobuf/*.proto`) are built in.
    pub fn compile(files: &[PathBuf], imports: &[PathBuf]) -> Result<Self, MethodError> {
        let compile = |e: protox::Error| compile_error(&e);
        let mut includes: Vec<PathBuf> = imports.to_vec();
        for f in files {
            let parent = f.parent().filter(|p| !p.as_os_str().is_empty());
            let parent = parent.unwrap_or(Path::new(".")).to_path_buf();
            if !imports.iter().any(|i| f.starts_with(i)) && !includes.contains(&parent) {
                includes.push(parent);
            }
        }
        let mut compiler = protox::Compiler::new(&includes).map_err(compile)?;
        compiler.include_imports(true).include_source_info(false);
        compiler.open_files(files).map_err(compile)?;
        let from = files
            .iter()
            .map(|f| f.display().to_string())
            .collect::<Vec<_>>()
            .join(", ");
        Ok(Protos {
            pool: compiler.descriptor_pool(),
            from,
        })
    }

    /// The types the files `sets` hold, each a serialized `FileDescriptorSet` (a protoset, as
    /// `protoc --include_imports --descriptor_set_out` or `buf build -o` write it), in one pool.
    pub fn read_descriptor_sets(sets: &[PathBuf]) -> Result<Self, MethodError> {
        let mut pool = DescriptorPool::new();
        for set in sets {
            let bad = |why: String| MethodError::Compile(format!("{}: {why}", set.display()));
            let bytes = std::fs::read(set).map_err(|e| bad(e.to_string()))?;
            let files = prost_reflect::prost_types::FileDescriptorSet::decode(bytes.as_slice())
                .map_err(|e| bad(format!("not a FileDescriptorSet ({e})")))?;
            // A file two sets both hold (a shared import) is added once.
            let new: Vec<_> = files
                .file
                .into_iter()
                .filter(|f| pool.get_file_by_name(f.name()).is_none())
                .collect();
            pool.add_file_descriptor_protos(new)
                .map_err(|e| bad(format!("{e} (a set needs its imports: --include_imports)")))?;
        }
        let from = sets
            .iter()
            .map(|f| f.display().to_string())
            .collect::<Vec<_>>()
            .join(", ");
        Ok(Protos { pool, from })
    }

    /// The types a serialized `FileDescriptorSet` holds (a server's reflection answers with
    /// its files), `from` saying where it came from.
    pub fn from_descriptor_set(bytes: &[u8], from: &str) -> Result<Self, MethodError> {
        let pool = DescriptorPool::decode(bytes)
            .map_err(|e| MethodError::Compile(format!("{from}: {e}")))?;
        Ok(Protos {
            pool,
            from: from.to_string(),
        })
    }

    /// The services' full names, sorted.
    pub fn services(&self) -> Vec<String> {
        let mut names: Vec<String> = self
            .pool
            .services()
            .map(|s| s.full_name().to_string())
            .collect();
        names.sort();
        names
    }

    /// Method `method` of service `service` (its full name, `package.Service`).
    /// The types as one serialized `FileDescriptorSet`, with their imports: what a plan
    /// carries so that its engine reads the same types wherever it runs.
    pub fn encode(&self) -> Vec<u8> {
        self.pool.encode_to_vec()
    }

    /// Types read back from [`Protos::encode`]'s bytes, named `from` in messages.
    pub fn decode(bytes: &[u8], from: &str) -> Result<Self, MethodError> {
        let pool = DescriptorPool::decode(bytes)
            .map_err(|e| MethodError::Compile(format!("{from}: {e}")))?;
        Ok(Protos {
            pool,
            from: from.to_string(),
        })
    }

    /// The method at `path` (`/package.Service/Method`, or without its first slash).
    pub fn method_at(&self, path: &str) -> Result<Method, MethodError> {
        let path = path.strip_prefix('/').unwrap_or(path);
        let (service, method) = path.rsplit_once('/').unwrap_or((path, ""));
        self.method(service, method)
    }

    pub fn method(&self, service: &str, method: &str) -> Result<Method, MethodError> {
        let Some(s) = self.pool.get_service_by_name(service) else {
            let known = self.services();
            return Err(MethodError::NoService {
                service: service.to_string(),
                from: self.from.clone(),
                known: if known.is_empty() {
                    "none".to_string()
                } else {
                    known.join(", ")
                },
            });
        };
        let Some(m) = s.methods().find(|m| m.name() == method) else {
            let known: Vec<String> = s.methods().map(|m| m.name().to_string()).collect();
            return Err(MethodError::NoMethod {
                service: service.to_string(),
                from: self.from.clone(),
                method: method.to_string(),
                known: known.join(", "),
            });
        };
        Ok(Method {
            path: format!("/{}/{}", s.full_name(), m.name()),
            input: m.input(),
            output: m.output(),
            client_streaming: m.is_client_streaming(),
            server_streaming: m.is_server_streaming(),
        })
    }
}

impl Protos {
    /// The file that defines `symbol` (a service's or a message's full name) and every file it
    /// imports, each a serialized `FileDescriptorProto`, the defining one first: what server
    /// reflection answers.
    pub fn file_of_symbol(&self, symbol: &str) -> Option<Vec<Vec<u8>>> {
        let file = self
            .pool
            .get_service_by_name(symbol)
            .map(|s| s.parent_file())
            .or_else(|| {
                self.pool
                    .get_message_by_name(symbol)
                    .map(|m| m.parent_file())
            })?;
        let mut order = vec![file];
        let mut i = 0;
        while i < order.len() {
            let deps: Vec<_> = order[i].dependencies().collect();
            for d in deps {
                if !order.iter().any(|f| f.name() == d.name()) {
                    order.push(d);
                }
            }
            i += 1;
        }
        Some(
            order
                .iter()
                .map(|f| f.file_descriptor_proto().encode_to_vec())
                .collect(),
        )
    }

    /// The file named `name` (as imports name it), serialized.
    pub fn file_by_name(&self, name: &str) -> Option<Vec<u8>> {
        self.pool
            .get_file_by_name(name)
            .map(|f| f.file_descriptor_proto().encode_to_vec())
    }
}

impl Method {
    /// The request `json` (gRPC's JSON mapping of the input type; unknown fields refused)
    /// encoded as a protobuf message, unframed.
    pub fn request_from_json(&self, json: &str) -> Result<Vec<u8>, MethodError> {
        let bad = |reason: String| MethodError::Request {
            message: self.input.full_name().to_string(),
            reason,
        };
        let mut de = serde_json::Deserializer::from_str(json);
        let message = DynamicMessage::deserialize(self.input.clone(), &mut de)
            .map_err(|e| bad(e.to_string()))?;
        de.end().map_err(|e| bad(e.to_string()))?;
        Ok(message.encode_to_vec())
    }

    /// The request body of a call: `json` as one framed message, or, for a method whose client
    /// streams, a JSON array as one framed message per element, sent in turn.
    pub fn framed_requests(&self, json: &str) -> Result<Vec<u8>, MethodError> {
        let array = self.client_streaming && json.trim_start().starts_with('[');
        if !array {
            return Ok(crate::frame(&self.request_from_json(json)?).to_vec());
        }
        let items: Vec<serde_json::Value> =
            serde_json::from_str(json).map_err(|e| MethodError::Request {
                message: format!("list of {}", self.input.full_name()),
                reason: e.to_string(),
            })?;
        let mut body = Vec::new();
        for item in items {
            body.extend_from_slice(&crate::frame(&self.request_from_json(&item.to_string())?));
        }
        Ok(body)
    }

    /// A response message's bytes in gRPC's JSON mapping, with the fields that hold their
    /// default value too (as k6's gRPC client and `grpcurl -emit-defaults` show them), so a
    /// capture of a zero or an empty string finds it.
    pub fn response_to_json(&self, bytes: &[u8]) -> Result<String, MethodError> {
        let bad = |reason: String| MethodError::Response {
            message: self.output.full_name().to_string(),
            reason,
        };
        let message =
            DynamicMessage::decode(self.output.clone(), bytes).map_err(|e| bad(e.to_string()))?;
        let options = prost_reflect::SerializeOptions::new().skip_default_fields(false);
        let mut out = serde_json::Serializer::new(Vec::new());
        message
            .serialize_with_options(&mut out, &options)
            .map_err(|e| bad(e.to_string()))?;
        String::from_utf8(out.into_inner()).map_err(|e| bad(e.to_string()))
    }
}

/// A compile error with its place, `file:line:col: message` (protox keeps the place apart, as
/// a diagnostic's label, and prints the message alone).
fn compile_error(e: &protox::Error) -> MethodError {
    use miette::Diagnostic;
    let label = e.labels().and_then(|mut l| l.next());
    let place = match (e.source_code(), label) {
        (Some(source), Some(label)) => source.read_span(label.inner(), 0, 0).ok().map(|at| {
            let file = at.name().or(e.file()).unwrap_or("").to_string();
            format!("{file}:{}:{}", at.line() + 1, at.column() + 1)
        }),
        _ => None,
    };
    let place = place.or_else(|| e.file().map(str::to_string));
    MethodError::Compile(match place {
        Some(p) => format!("{p}: {e}"),
        None => e.to_string(),
    })
}

/// The reference service's `.proto` file (`loadlab.reference.v1.Reference`), as shipped.
pub const REFERENCE_PROTO: &str = include_str!("../proto/loadlab/reference/v1/reference.proto");

/// Its name, as an import would name it.
pub const REFERENCE_PROTO_NAME: &str = "loadlab/reference/v1/reference.proto";

impl Protos {
    /// The reference service's types, compiled from the file built into loadlab.
    pub fn reference() -> Protos {
        /// Serves the built-in file alone.
        struct Builtin;
        impl protox::file::FileResolver for Builtin {
            fn resolve_path(&self, path: &Path) -> Option<String> {
                (path == Path::new(REFERENCE_PROTO_NAME)).then(|| REFERENCE_PROTO_NAME.into())
            }
            fn open_file(&self, name: &str) -> Result<protox::file::File, protox::Error> {
                match name {
                    REFERENCE_PROTO_NAME => protox::file::File::from_source(name, REFERENCE_PROTO),
                    _ => Err(protox::Error::file_not_found(name)),
                }
            }
        }
        let mut compiler = protox::Compiler::with_file_resolver(Builtin);
        compiler
            .open_file(REFERENCE_PROTO_NAME)
            .expect("the built-in .proto file compiles");
        Protos {
            pool: compiler.descriptor_pool(),
            from: REFERENCE_PROTO_NAME.into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reference() -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("reference.proto");
        std::fs::write(&file, REFERENCE_PROTO).unwrap();
        (dir, file)
    }

    #[test]
    fn a_method_found_in_a_proto_file_encodes_its_request_from_json_and_reads_its_answer() {
        let (_dir, file) = reference();
        let protos = Protos::compile(&[file], &[]).unwrap();
        assert_eq!(protos.services(), ["loadlab.reference.v1.Reference"]);
        let calc = protos
            .method("loadlab.reference.v1.Reference", "Calc")
            .unwrap();
        assert_eq!(calc.path, "/loadlab.reference.v1.Reference/Calc");
        assert!(!calc.client_streaming && !calc.server_streaming);
        // n = 1000 (field 1, varint), from = 5 (field 2); 64-bit integers may be strings.
        let bytes = calc
            .request_from_json(r#"{"n": 1000, "from": "5"}"#)
            .unwrap();
        assert_eq!(bytes, [0x08, 0xe8, 0x07, 0x10, 0x05]);
        assert_eq!(calc.request_from_json("{}").unwrap(), Vec::<u8>::new());
        // sum = 1.5 (field 1, 64-bit).
        let mut reply = vec![0x09];
        reply.extend_from_slice(&1.5f64.to_le_bytes());
        assert_eq!(calc.response_to_json(&reply).unwrap(), r#"{"sum":1.5}"#);
        let ticks = protos
            .method("loadlab.reference.v1.Reference", "Ticks")
            .unwrap();
        assert!(ticks.server_streaming && !ticks.client_streaming);
    }

    #[test]
    fn a_client_stream_sends_a_json_arrays_elements_as_its_messages() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("sum.proto");
        std::fs::write(
            &file,
            "syntax = \"proto3\";\npackage t;\nmessage N { int32 n = 1; }\n\
             service S { rpc Sum(stream N) returns (N); rpc Echo(N) returns (stream N); }\n",
        )
        .unwrap();
        let protos = Protos::compile(&[file], &[]).unwrap();
        let sum = protos.method("t.S", "Sum").unwrap();
        // Three messages, each framed: n = 1, n = 2, and the empty one.
        assert_eq!(
            sum.framed_requests(r#"[{"n": 1}, {"n": 2}, {}]"#).unwrap(),
            [
                &[0, 0, 0, 0, 2, 0x08, 0x01][..],
                &[0, 0, 0, 0, 2, 0x08, 0x02],
                &[0, 0, 0, 0, 0]
            ]
            .concat()
        );
        // One object is one message; an element that is not the input type is refused.
        assert_eq!(
            sum.framed_requests(r#"{"n": 1}"#).unwrap(),
            [0, 0, 0, 0, 2, 0x08, 0x01]
        );
        let err = sum.framed_requests(r#"[{"n": 1}, {"m": 2}]"#).unwrap_err();
        assert!(err.to_string().contains("not a t.N in JSON"), "{err}");
        // A method whose client sends one message takes no array.
        let echo = protos.method("t.S", "Echo").unwrap();
        assert!(echo.framed_requests(r#"[{"n": 1}]"#).is_err());
    }

    #[test]
    fn a_protoset_holds_the_same_types_as_its_proto_files() {
        let (dir, file) = reference();
        let protos = Protos::compile(&[file], &[]).unwrap();
        // What protoc --include_imports --descriptor_set_out writes: every file, imports too.
        let files = protos
            .file_of_symbol("loadlab.reference.v1.Reference")
            .unwrap()
            .iter()
            .map(|f| prost_reflect::prost_types::FileDescriptorProto::decode(f.as_slice()).unwrap())
            .collect();
        let set = prost_reflect::prost_types::FileDescriptorSet { file: files };
        let path = dir.path().join("reference.protoset");
        std::fs::write(&path, set.encode_to_vec()).unwrap();
        // Given twice, its files are added once.
        let read = Protos::read_descriptor_sets(&[path.clone(), path.clone()]).unwrap();
        assert_eq!(read.services(), protos.services());
        let calc = read
            .method("loadlab.reference.v1.Reference", "Calc")
            .unwrap();
        assert_eq!(
            calc.request_from_json(r#"{"n": 1000, "from": "5"}"#)
                .unwrap(),
            [0x08, 0xe8, 0x07, 0x10, 0x05]
        );
        // A file that is no descriptor set says so.
        let junk = dir.path().join("junk.protoset");
        std::fs::write(&junk, b"\xff\xff not protobuf").unwrap();
        let err = Protos::read_descriptor_sets(&[junk]).unwrap_err();
        assert!(err.to_string().contains("not a FileDescriptorSet"), "{err}");
    }

    #[test]
    fn what_cannot_be_called_is_refused_with_what_there_is() {
        let (dir, file) = reference();
        let protos = Protos::compile(std::slice::from_ref(&file), &[]).unwrap();
        let e = protos.method("Reference", "Ping").unwrap_err().to_string();
        assert!(
            e.contains("its services: loadlab.reference.v1.Reference"),
            "{e}"
        );
        let e = protos
            .method("loadlab.reference.v1.Reference", "Pong")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("its methods: Ping, Delay, Block, Calc, Heavy, Stall, Ticks"),
            "{e}"
        );
        let calc = protos
            .method("loadlab.reference.v1.Reference", "Calc")
            .unwrap();
        for bad in [r#"{"m": 1}"#, r#"{"n": "x"}"#, "[1]", "{", r#"{"n": 1} 2"#] {
            let e = calc.request_from_json(bad).unwrap_err().to_string();
            assert!(
                e.contains("not a loadlab.reference.v1.CalcRequest in JSON"),
                "{bad}: {e}"
            );
        }
        let broken = dir.path().join("broken.proto");
        std::fs::write(&broken, "syntax = \"proto3\";\nmessage A { int32 x = ; }\n").unwrap();
        let e = Protos::compile(&[broken], &[]).unwrap_err().to_string();
        assert!(e.starts_with("broken.proto:2:23: "), "{e}");
        let missing = dir.path().join("missing.proto");
        let e = Protos::compile(&[missing], &[]).unwrap_err().to_string();
        assert!(e.contains("missing.proto"), "{e}");
        let importer = dir.path().join("importer.proto");
        std::fs::write(
            &importer,
            "syntax = \"proto3\";\nimport \"nowhere.proto\";\n",
        )
        .unwrap();
        let e = Protos::compile(&[importer], &[]).unwrap_err().to_string();
        assert!(
            e.starts_with("importer.proto:2:1: import 'nowhere.proto' not found"),
            "{e}"
        );
    }

    #[test]
    fn imports_resolve_from_the_import_paths_and_the_well_known_types() {
        let dir = tempfile::tempdir().unwrap();
        let lib = dir.path().join("lib");
        std::fs::create_dir_all(lib.join("shared")).unwrap();
        std::fs::write(
            lib.join("shared/money.proto"),
            "syntax = \"proto3\";\npackage shared;\nmessage Money { int64 cents = 1; }\n",
        )
        .unwrap();
        let file = dir.path().join("shop.proto");
        std::fs::write(
            &file,
            "syntax = \"proto3\";\npackage shop;\nimport \"shared/money.proto\";\n\
             import \"google/protobuf/timestamp.proto\";\n\
             message Order { shared.Money total = 1; google.protobuf.Timestamp at = 2; }\n\
             service Shop { rpc Buy(Order) returns (Order); }\n",
        )
        .unwrap();
        let protos = Protos::compile(&[file], &[lib]).unwrap();
        let buy = protos.method("shop.Shop", "Buy").unwrap();
        let bytes = buy
            .request_from_json(r#"{"total": {"cents": "250"}, "at": "1970-01-01T00:00:01Z"}"#)
            .unwrap();
        let back = buy.response_to_json(&bytes).unwrap();
        assert_eq!(
            back,
            r#"{"total":{"cents":"250"},"at":"1970-01-01T00:00:01Z"}"#
        );
    }
}
