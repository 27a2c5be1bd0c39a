// The process protocol of spec_tests/adapters/process.py, served from Node.js: one JSON line per message,
// then the .npy arrays it names (their sizes in bytes in "arrays"); {"$array": i} stands for the i-th array,
// {"$float": "nan"} for a float JSON cannot write. Reusable by any JavaScript adapter: serve(info, functions).
'use strict';

// ------------------------------------------------------------------------------------------------ .npy
const DTYPES = {
  '<f8': [Float64Array, 8], '<f4': [Float32Array, 4], '<i8': [BigInt64Array, 8], '<i4': [Int32Array, 4],
  '|b1': [Uint8Array, 1],
};

// An .npy file (version 1.0) -> {dtype, shape, data}: data a typed array of its own memory.
function parseNpy(buf) {
  if (buf.readUInt8(0) !== 0x93 || buf.toString('latin1', 1, 6) !== 'NUMPY') throw new Error('not an .npy file');
  const major = buf.readUInt8(6);
  const headerLen = major === 1 ? buf.readUInt16LE(8) : buf.readUInt32LE(8);
  const start = major === 1 ? 10 : 12;
  const header = buf.toString('latin1', start, start + headerLen);
  const dtype = /'descr':\s*'([^']+)'/.exec(header)[1];
  if (/'fortran_order':\s*True/.test(header)) throw new Error('fortran order is not part of the protocol');
  const shape = /'shape':\s*\(([^)]*)\)/.exec(header)[1].split(',').map((s) => s.trim()).filter((s) => s)
    .map(Number);
  if (!(dtype in DTYPES)) throw new Error(`dtype ${dtype} is not part of the protocol`);
  const [Kind] = DTYPES[dtype];
  const body = buf.subarray(start + headerLen);
  const data = new Kind(body.buffer.slice(body.byteOffset, body.byteOffset + body.length));  // aligned copy
  return { dtype, shape, data };
}

// {dtype, shape, data} -> an .npy file (version 1.0), its header padded to 64 bytes as NumPy writes it.
function writeNpy({ dtype, shape, data }) {
  const shapeText = shape.length === 1 ? `(${shape[0]},)` : `(${shape.join(', ')})`;
  let header = `{'descr': '${dtype}', 'fortran_order': False, 'shape': ${shapeText}, }`;
  const total = 10 + header.length + 1;
  header += ' '.repeat((64 - (total % 64)) % 64) + '\n';
  const head = Buffer.alloc(10);
  head.writeUInt8(0x93, 0);
  head.write('NUMPY', 1, 'latin1');
  head.writeUInt8(1, 6);
  head.writeUInt8(0, 7);
  head.writeUInt16LE(header.length, 8);
  return Buffer.concat([head, Buffer.from(header, 'latin1'), Buffer.from(data.buffer, data.byteOffset, data.byteLength)]);
}

// ------------------------------------------------------------------------------------------ messages
function decode(value, arrays) {
  if (Array.isArray(value)) return value.map((v) => decode(v, arrays));
  if (value !== null && typeof value === 'object') {
    const keys = Object.keys(value);
    if (keys.length === 1 && keys[0] === '$array') return arrays[value.$array];
    if (keys.length === 1 && keys[0] === '$float') return Number(value.$float.replace('inf', 'Infinity'));
    return Object.fromEntries(keys.map((k) => [k, decode(value[k], arrays)]));
  }
  return value;
}

function encode(value, out) {
  if (value && value.shape && value.data) { out.push(writeNpy(value)); return { $array: out.length - 1 }; }
  if (Array.isArray(value)) return value.map((v) => encode(v, out));
  if (typeof value === 'number' && !Number.isFinite(value)) {
    return { $float: Number.isNaN(value) ? 'nan' : (value > 0 ? 'inf' : '-inf') };
  }
  if (value !== null && typeof value === 'object') {
    return Object.fromEntries(Object.keys(value).map((k) => [k, encode(value[k], out)]));
  }
  return value;
}

function send(message, arrays) {
  const line = JSON.stringify({ ...message, arrays: arrays.map((a) => a.length) }) + '\n';
  process.stdout.write(Buffer.concat([Buffer.from(line), ...arrays]));
}

// The contract's error types keep their meaning across the pipe (spec_tests/adapters/process.py).
class ContractError extends Error {
  constructor(type, message) { super(message); this.type = type; }
}
const valueError = (m) => new ContractError('ValueError', m);
const typeError = (m) => new ContractError('TypeError', m);
const notImplemented = (m) => new ContractError('NotImplementedError', m);

// Answer requests one at a time until stdin ends. functions: {name: async (args) => result}; hello(args, info,
// functions) is called with the __hello__ request's arguments (the contract's function names and lists:
// functions, rope_keys, rope_types, layouts, placements) before the answer, and may adjust info and functions.
function serve(info, functions, hello = () => {}) {
  let pending = Buffer.alloc(0);
  let busy = Promise.resolve();
  const next = () => {  // one complete message off the front of `pending`, or null
    const eol = pending.indexOf(0x0a);
    if (eol < 0) return null;
    const message = JSON.parse(pending.toString('utf8', 0, eol));
    const sizes = message.arrays || [];
    const need = eol + 1 + sizes.reduce((a, b) => a + b, 0);
    if (pending.length < need) return null;
    let at = eol + 1;
    const arrays = sizes.map((n) => { const a = parseNpy(pending.subarray(at, at + n)); at += n; return a; });
    pending = pending.subarray(need);
    return [message, arrays];
  };
  let greeted = false;  // the proxy greets every program it starts before any call (its lists come with it)
  const answer = async ([message, arrays]) => {
    const out = [];
    try {
      let result;
      if (message.call === '__hello__') {
        hello(decode(message.args, arrays), info, functions);
        greeted = true;
        result = { protocol: 1, info, functions: Object.keys(functions).sort() };
      } else if (!greeted) {
        throw new ContractError('ProtocolError', `${message.call} came before any __hello__ request: the proxy `
          + 'greets every program it starts first (spec_tests/adapters/process.py)');
      } else if (message.call in functions) {
        result = await functions[message.call](decode(message.args, arrays));
      } else {
        throw notImplemented(`${info.name} does not provide ${message.call}`);
      }
      send({ result: encode(result, out) }, out);
    } catch (err) {
      send({ error: { type: err.type || err.constructor.name, message: String(err.message || err) } }, []);
    }
  };
  process.stdin.on('data', (chunk) => {
    pending = Buffer.concat([pending, chunk]);
    let found;
    while ((found = next()) !== null) {
      const request = found;
      busy = busy.then(() => answer(request));
    }
  });
  process.stdin.on('end', () => { busy.then(() => process.exit(0)); });
}

module.exports = { parseNpy, writeNpy, serve, ContractError, valueError, typeError, notImplemented };
