// A one-node ONNX model written as protobuf bytes (onnx/onnx.proto: ModelProto, GraphProto, NodeProto,
// AttributeProto, ValueInfoProto), so that onnxruntime-node runs a single operator without the onnx package.
'use strict';

// protobuf wire format: a key is (field << 3 | wire type); 0 = varint, 2 = length-delimited, 5 = 32-bit
function varint(value) {
  let n = BigInt.asUintN(64, BigInt(value));  // negative int64: ten bytes of two's complement
  const bytes = [];
  do {
    let byte = Number(n & 0x7fn);
    n >>= 7n;
    if (n) byte |= 0x80;
    bytes.push(byte);
  } while (n);
  return Buffer.from(bytes);
}
const key = (field, wire) => varint((field << 3) | wire);
const int = (field, value) => Buffer.concat([key(field, 0), varint(value)]);
const bytes = (field, payload) => Buffer.concat([key(field, 2), varint(payload.length), payload]);
const str = (field, text) => bytes(field, Buffer.from(text, 'utf8'));
function float32(field, value) {
  const b = Buffer.alloc(4);
  b.writeFloatLE(value, 0);
  return Buffer.concat([key(field, 5), b]);
}

// TensorProto.DataType of each ORT tensor type
const ELEM_TYPE = { float32: 1, int32: 6, int64: 7, bool: 9, float16: 10, float64: 11 };

// AttributeProto: name = 1, f = 2, i = 3, s = 4, type = 20 (FLOAT 1, INT 2, STRING 3)
function attribute(name, value) {
  if (typeof value === 'string') return Buffer.concat([str(1, name), str(4, value), int(20, 3)]);
  if (Number.isInteger(value) && !value.isFloat) return Buffer.concat([str(1, name), int(3, value), int(20, 2)]);
  return Buffer.concat([str(1, name), float32(2, Number(value)), int(20, 1)]);
}

// ValueInfoProto {name = 1, type = 2: TypeProto {tensor_type = 1: {elem_type = 1, shape = 2: {dim = 1: {dim_value = 1}}}}}
function valueInfo(name, type, shape) {
  const parts = [int(1, ELEM_TYPE[type])];
  if (shape) parts.push(bytes(2, Buffer.concat(shape.map((d) => bytes(1, int(1, d))))));  // no shape: any
  const tensor = Buffer.concat(parts);
  return Buffer.concat([str(1, name), bytes(2, bytes(1, tensor))]);
}

// A float attribute that happens to hold an integer value (scale = 1.0) must still be written as FLOAT.
const asFloat = (value) => Object.assign(new Number(value), { isFloat: true });

// The model of one node: inputs [{name, type, shape} | null for an omitted optional input], outputs likewise,
// attributes {name: value}; domain '' (ai.onnx) or 'com.microsoft'; opset of that domain.
function oneNodeModel({ op, domain = '', opset, inputs, outputs, attributes = {} }) {
  const node = Buffer.concat([
    ...inputs.map((i) => str(1, i ? i.name : '')),
    ...outputs.map((o) => str(2, o.name)),
    str(3, 'node'), str(4, op),
    ...Object.entries(attributes).filter(([, v]) => v !== undefined && v !== null).map(([n, v]) => bytes(5, attribute(n, v))),
    str(7, domain),
  ]);
  const graph = Buffer.concat([
    bytes(1, node), str(2, 'graph'),
    ...inputs.filter((i) => i).map((i) => bytes(11, valueInfo(i.name, i.type, i.shape))),
    ...outputs.map((o) => bytes(12, valueInfo(o.name, o.type, o.shape))),
  ]);
  const opsets = [bytes(8, Buffer.concat([str(1, ''), int(2, domain ? 23 : opset)]))];
  if (domain) opsets.push(bytes(8, Buffer.concat([str(1, domain), int(2, opset)])));
  return new Uint8Array(Buffer.concat([int(1, 10), ...opsets, bytes(7, graph)]));  // ir_version 10
}

module.exports = { oneNodeModel, asFloat };
