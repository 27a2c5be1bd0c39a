// Adapter: onnxruntime-node (npm), one ONNX operator per contract call, served over the process protocol of
// spec_tests/adapters/process.py. Not Python: `node adapter.js [ai.onnx | com.microsoft]`.
//
//   ai.onnx        Softmax (opset 13), RotaryEmbedding and Attention (opset 23)
//   com.microsoft  Softmax, the contrib RotaryEmbedding, MultiHeadAttention and GroupQueryAttention
//
// Every operator runs in float32 on the CPU execution provider. The RoPE operators take their cos/sin cache
// as an input and compute no angle: the adapter serves the contract's apply_rope_tables (the caller's tables,
// fed to the operator as its cache) and declares INFO rope_tables = input, so the suite tests the rotation
// alone and the matrix credits the operators with no scaling rule; a cache built here would be the adapter's
// arithmetic, not the runtime's. Arguments the contract defines are checked here, before the call, as the
// suite asks (bad input: ValueError naming the parameter; a configuration the operator lacks:
// NotImplementedError); what the operator then does with valid input is what the suite sees.
'use strict';

const ort = require('onnxruntime-node');
const { serve, valueError, typeError, notImplemented } = require('./protocol');
const { oneNodeModel, asFloat } = require('./onnx_model');

const OPS = process.argv[2] || 'ai.onnx';
if (!['ai.onnx', 'com.microsoft'].includes(OPS)) throw new Error(`ops must be ai.onnx or com.microsoft, got ${OPS}`);
const THREADS = Number(process.env.REFPOS_ORT_THREADS || 1);

// ------------------------------------------------------------------------------------------- arrays
const size = (shape) => shape.reduce((a, b) => a * b, 1);
const f32 = (a) => Float32Array.from(a.data, Number);
const result64 = (data, shape) => ({ dtype: '<f8', shape, data: Float64Array.from(data) });

function integerPositions(a) {
  if (a.dtype !== '<i8' && a.dtype !== '<i4') throw typeError(`positions must be integers, got ${a.dtype}`);
  const values = Array.from(a.data, Number);
  if (values.some((p) => p < 0)) throw valueError('positions must be >= 0 (rows of the cos/sin cache)');
  return values;
}

// `array` ({shape, data}) broadcast to `shape` (NumPy's rules), as a new Float32Array
function broadcastTo(array, shape) {
  const src = array.shape;
  if (src.length > shape.length) throw valueError(`cannot broadcast ${src} to ${shape}`);
  const pad = shape.length - src.length;
  const strides = new Array(shape.length).fill(0);
  let stride = 1;
  for (let i = src.length - 1; i >= 0; i--) {
    const want = shape[i + pad];
    if (src[i] !== want && src[i] !== 1) throw valueError(`cannot broadcast ${src} to ${shape}`);
    strides[i + pad] = src[i] === 1 ? 0 : stride;
    stride *= src[i];
  }
  const out = new Float32Array(size(shape));
  const index = new Array(shape.length).fill(0);
  for (let n = 0; n < out.length; n++) {
    let at = 0;
    for (let i = 0; i < shape.length; i++) at += index[i] * strides[i];
    out[n] = Number(array.data[at]);
    for (let i = shape.length - 1; i >= 0; i--) { if (++index[i] < shape[i]) break; index[i] = 0; }
  }
  return out;
}

// (B, A, C, D) -> (B, C, A, D): heads-first to sequence-first and back (the contrib operators are BSNH)
function swapMiddle(data, [b, a, c, d]) {
  const out = new Float32Array(data.length);
  for (let i = 0; i < b; i++) for (let j = 0; j < a; j++) for (let k = 0; k < c; k++) {
    const from = ((i * a + j) * c + k) * d;
    out.set(data.subarray(from, from + d), ((i * c + k) * a + j) * d);
  }
  return out;
}

async function run(spec, feeds) {
  const session = await ort.InferenceSession.create(oneNodeModel(spec),
    { intraOpNumThreads: THREADS, interOpNumThreads: 1, graphOptimizationLevel: 'disabled' });
  try {
    const named = {};
    for (const [name, [type, data, shape]] of Object.entries(feeds)) named[name] = new ort.Tensor(type, data, shape);
    return await session.run(named);
  } finally {
    await session.release();
  }
}

// ------------------------------------------------------------------------------------------ softmax
// ONNX Softmax has no mask: a masked logit is -inf, as a model graph adds it (so a fully masked row is 0/0)
async function softmax({ logits, mask, fully_masked }) {
  if (!['zeros', 'nan'].includes(fully_masked)) throw valueError(`fully_masked must be 'zeros' or 'nan', got ${fully_masked}`);
  const x = f32(logits);
  if (mask) {
    const allowed = broadcastTo(mask, logits.shape);
    for (let i = 0; i < x.length; i++) if (!allowed[i]) x[i] = -Infinity;
  }
  const out = await run({ op: 'Softmax', opset: 13, domain: '', attributes: { axis: -1 },
    inputs: [{ name: 'x', type: 'float32', shape: logits.shape }], outputs: [{ name: 'y', type: 'float32' }] },
  { x: ['float32', x, logits.shape] });
  return result64(out.y.data, logits.shape);
}

// --------------------------------------------------------------------------------------------- RoPE
// the contract's lists, told by the proxy in its first request (spec_tests/adapters/process.py, __hello__)
const CONTRACT = { ropeKeys: new Set(), ropeTypes: [], layouts: [], placements: [] };

// the rotation's settings from a contract rope dict (spec_tests/README.md, "RoPE configurations"); the caller
// gives the cos/sin tables, so the dict's rule is checked but not read, only its geometry
function ropeSettings(rope) {
  const unknown = Object.keys(rope).filter((k) => !CONTRACT.ropeKeys.has(k));
  if (unknown.length) throw valueError(`unknown rope keys ${unknown}`);
  const get = (k, d) => (rope[k] === null || rope[k] === undefined ? d : rope[k]);
  if (get('mrope_section', null) !== null) throw notImplemented('M-RoPE: the ONNX rotary operators take one position per token');
  const kind = get('rope_type', 'default');
  if (!CONTRACT.ropeTypes.includes(kind)) throw valueError(`rope_type must be one of ${CONTRACT.ropeTypes}, got ${kind}`);
  const layout = get('layout', 'half');
  if (!CONTRACT.layouts.includes(layout)) throw valueError(`layout must be one of ${CONTRACT.layouts}, got ${layout}`);
  if (layout === 'deinterleaved') throw notImplemented('layout deinterleaved: the operators write the pairs back where they read them');
  const placement = get('placement', 'first');
  if (!CONTRACT.placements.includes(placement)) throw valueError(`placement must be one of ${CONTRACT.placements}, got ${placement}`);
  if (placement !== 'first') throw notImplemented(`placement ${placement}: rotary_embedding_dim rotates the first channels`);
  const head = get('head_dim', null);
  if (!Number.isInteger(head) || head <= 0 || head % 2) throw valueError(`head_dim must be a positive even integer, got ${head}`);
  const width = get('rotary_dim', null) !== null ? get('rotary_dim') : Math.trunc(head * get('partial_rotary_factor', 1.0));
  if (!Number.isInteger(width) || width <= 0 || width > head || width % 2) throw valueError(`rotary width must be even and in (0, head_dim], got ${width}`);
  return { head, width, interleaved: layout === 'interleaved' ? 1 : 0 };
}

// RotaryEmbedding (ai.onnx or com.microsoft) of x (..., T, D) with the cache (rows, m) and row ids per token
async function rotate(settings, x, positions, ids, cos, sin, rows) {
  const shape = x.shape;
  const t = shape[shape.length - 2];
  if (shape.length < 2 || shape[shape.length - 1] !== settings.head) throw valueError(`x must be (..., T, head_dim), got ${shape}`);
  let batch, heads;
  if (positions.shape.length === 1 && positions.shape[0] === t) {
    batch = 1; heads = size(shape.slice(0, -2));  // every leading axis at the same positions: one batch row
  } else if (positions.shape.length === 2 && shape.length === 4 && positions.shape[0] === shape[0] && positions.shape[1] === t) {
    batch = shape[0]; heads = shape[1];
  } else {
    throw valueError(`positions must be (T,) or (B, T) with x (B, H, T, D), got ${positions.shape} for x ${shape}`);
  }
  const m = settings.width / 2;
  const x4 = [batch, heads, t, settings.head];
  const inputs = { x: { name: 'x', type: 'float32', shape: x4 }, cos: { name: 'cos', type: 'float32', shape: [rows, m] },
    sin: { name: 'sin', type: 'float32', shape: [rows, m] }, ids: { name: 'ids', type: 'int64', shape: [batch, t] } };
  const feeds = { x: ['float32', f32(x), x4], cos: ['float32', cos, [rows, m]], sin: ['float32', sin, [rows, m]],
    ids: ['int64', BigInt64Array.from(ids, BigInt), [batch, t]] };
  const rotaryDim = settings.width < settings.head ? settings.width : undefined;
  const spec = OPS === 'ai.onnx'
    ? { op: 'RotaryEmbedding', opset: 23, domain: '', inputs: [inputs.x, inputs.cos, inputs.sin, inputs.ids],  // X, cos_cache, sin_cache, position_ids
      attributes: { interleaved: settings.interleaved, rotary_embedding_dim: rotaryDim } }
    : { op: 'RotaryEmbedding', opset: 1, domain: 'com.microsoft', inputs: [inputs.x, inputs.ids, inputs.cos, inputs.sin],  // input, position_ids, cos_cache, sin_cache
      attributes: { interleaved: settings.interleaved, rotary_embedding_dim: rotaryDim, num_heads: rotaryDim ? heads : undefined } };
  const out = await run({ ...spec, outputs: [{ name: 'y', type: 'float32' }] }, feeds);
  return result64(out.y.data, shape);
}

// the contract's apply_rope_tables: cos, sin (N, m) as the operator's cache, the token at position p reading
// row p (position_ids = positions). onnxruntime refuses a cache with fewer rows than the sequence ("Updating
// cos_cache and sin_cache in RotaryEmbedding is not currently supported", rotary_embedding.cc) where the ONNX
// schema asks for max(position_ids) + 1 rows (positions [0, 0] with one row: refused, measured); a
// deployment's cache of max_position_embeddings rows never meets it, a cache cut to a left-padded batch's
// positions does. The adapter appends zero rows up to T, which no position_id reads (ort_node.xfails.txt)
async function applyRopeTables({ x, positions, cos, sin, rope }) {
  const settings = ropeSettings(rope);
  const pos = integerPositions(positions);
  const m = settings.width / 2;
  if (cos.shape.length !== 2 || cos.shape[1] !== m || sin.shape.join() !== cos.shape.join()) {
    throw valueError(`cos and sin must be (N, ${m}), got ${cos.shape} and ${sin.shape}`);
  }
  const given = cos.shape[0];
  if (pos.some((p) => p >= given)) throw valueError(`positions must be < ${given} (the rows of the tables)`);
  const rows = Math.max(given, x.shape[x.shape.length - 2]);
  const padded = (table) => { const out = new Float32Array(rows * m); out.set(f32(table)); return out; };
  return rotate(settings, x, positions, pos, padded(cos), padded(sin), rows);
}

// ---------------------------------------------------------------------------------------- attention
async function attention({ q, k, v, bias, mask, scale, causal, softcap }) {
  if (q.shape.length !== 4 || k.shape.length !== 4 || v.shape.length !== 4) throw notImplemented('the attention operators take (B, H, T, d)');
  const [b, h, tq, d] = q.shape;
  const [, hkv, tk] = k.shape;
  const dv = v.shape[3];
  if (h % hkv) throw valueError(`q heads (${h}) must be a multiple of kv heads (${hkv})`);
  if (scale !== null && !(scale > 0)) throw valueError(`scale must be > 0, got ${scale}`);
  const full = [b, h, tq, tk];
  let additive = null;  // bias + (-inf where masked), (B, H, Tq, Tk)
  if (bias || mask) {
    additive = bias ? broadcastTo(bias, full) : new Float32Array(size(full));
    if (mask) {
      const allowed = broadcastTo(mask, full);
      for (let i = 0; i < additive.length; i++) if (!allowed[i]) additive[i] = -Infinity;
    }
  }
  return OPS === 'ai.onnx' ? onnxAttention({ q, k, v, additive, scale, causal, softcap, b, h, tq, d, hkv, tk, dv })
    : contribAttention({ q, k, v, additive, scale, causal, softcap, b, h, tq, d, hkv, tk, dv });
}

// ai.onnx Attention-23, 4-D (B, H, S, d); a causal call with T_q < T_k passes the first T_k − T_q keys as the
// past (past_key / past_value in, present_key / present_value out), the way a decoder's cache feeds it
async function onnxAttention({ q, k, v, additive, scale, causal, softcap, b, h, tq, d, hkv, tk, dv }) {
  const past = causal ? tk - tq : 0;
  const kf = f32(k);
  const vf = f32(v);
  const split = (data, width) => {  // (B, Hkv, T_k, ·) -> past rows and the rest
    const head = new Float32Array(b * hkv * past * width);
    const rest = new Float32Array(b * hkv * (tk - past) * width);
    for (let i = 0; i < b * hkv; i++) {
      head.set(data.subarray(i * tk * width, (i * tk + past) * width), i * past * width);
      rest.set(data.subarray((i * tk + past) * width, (i + 1) * tk * width), i * (tk - past) * width);
    }
    return [head, rest];
  };
  const [pastK, curK] = split(kf, d);
  const [pastV, curV] = split(vf, dv);
  const inputs = [{ name: 'q', type: 'float32', shape: [b, h, tq, d] },
    { name: 'k', type: 'float32', shape: [b, hkv, tk - past, d] }, { name: 'v', type: 'float32', shape: [b, hkv, tk - past, dv] },
    additive ? { name: 'mask', type: 'float32', shape: [b, h, tq, tk] } : null];
  const feeds = { q: ['float32', f32(q), [b, h, tq, d]], k: ['float32', curK, [b, hkv, tk - past, d]],
    v: ['float32', curV, [b, hkv, tk - past, dv]] };
  if (additive) feeds.mask = ['float32', additive, [b, h, tq, tk]];
  const outputs = [{ name: 'y', type: 'float32' }];
  if (past) {
    inputs.push({ name: 'past_k', type: 'float32', shape: [b, hkv, past, d] }, { name: 'past_v', type: 'float32', shape: [b, hkv, past, dv] });
    feeds.past_k = ['float32', pastK, [b, hkv, past, d]];
    feeds.past_v = ['float32', pastV, [b, hkv, past, dv]];
    outputs.push({ name: 'present_k', type: 'float32' }, { name: 'present_v', type: 'float32' });
  }
  const out = await run({ op: 'Attention', opset: 23, domain: '', inputs, outputs,
    attributes: { is_causal: causal ? 1 : 0, scale: scale === null ? undefined : asFloat(scale),
      softcap: softcap === null ? undefined : asFloat(softcap) } }, feeds);
  return result64(out.y.data, [b, h, tq, dv]);
}

// com.microsoft: GroupQueryAttention for causal calls (always causal; the first T_k − T_q keys as its past),
// MultiHeadAttention otherwise (H = H_kv); both take (B, S, H·d)
async function contribAttention({ q, k, v, additive, scale, causal, softcap, b, h, tq, d, hkv, tk, dv }) {
  const bsd = (a, [bb, hh, tt, dd]) => swapMiddle(f32(a), [bb, hh, tt, dd]);
  if (causal) {
    if (dv !== d) throw notImplemented('GroupQueryAttention: values of the key width only');
    // checked by the operator (group_query_attention_helper.h): an error there is a refusal, not a finding
    if (d % 8) throw notImplemented(`GroupQueryAttention: head_size must be a multiple of 8, got ${d}`);
    if (b > 1 && tq > 1 && tk > tq) throw notImplemented('GroupQueryAttention: batch_size 1 when several queries follow a past');
    const past = tk - tq;
    const kAll = f32(k);
    const vAll = f32(v);
    const pick = (data, from, to) => {  // rows from … to − 1 of (B, Hkv, T_k, d), as (B, Hkv, to − from, d)
      const out = new Float32Array(b * hkv * (to - from) * d);
      for (let i = 0; i < b * hkv; i++) out.set(data.subarray((i * tk + from) * d, (i * tk + to) * d), i * (to - from) * d);
      return out;
    };
    const cur = [b, hkv, tq, d];
    const inputs = [{ name: 'q', type: 'float32', shape: [b, tq, h * d] }, { name: 'k', type: 'float32', shape: [b, tq, hkv * d] },
      { name: 'v', type: 'float32', shape: [b, tq, hkv * d] }, { name: 'past_k', type: 'float32', shape: [b, hkv, past, d] },
      { name: 'past_v', type: 'float32', shape: [b, hkv, past, d] }, { name: 'seqlens_k', type: 'int32', shape: [b] },
      { name: 'total', type: 'int32', shape: [] }, null, null, null,
      additive ? { name: 'bias', type: 'float32', shape: [b, h, tq, tk] } : null];
    const feeds = { q: ['float32', bsd(q, [b, h, tq, d]), [b, tq, h * d]],
      k: ['float32', swapMiddle(pick(kAll, past, tk), cur), [b, tq, hkv * d]],
      v: ['float32', swapMiddle(pick(vAll, past, tk), cur), [b, tq, hkv * d]],
      past_k: ['float32', pick(kAll, 0, past), [b, hkv, past, d]], past_v: ['float32', pick(vAll, 0, past), [b, hkv, past, d]],
      seqlens_k: ['int32', new Int32Array(b).fill(tk - 1), [b]], total: ['int32', Int32Array.from([tk]), []] };
    if (additive) feeds.bias = ['float32', additive, [b, h, tq, tk]];
    const out = await run({ op: 'GroupQueryAttention', opset: 1, domain: 'com.microsoft', inputs,
      outputs: [{ name: 'y', type: 'float32' }, { name: 'present_k', type: 'float32' }, { name: 'present_v', type: 'float32' }],
      attributes: { num_heads: h, kv_num_heads: hkv, scale: scale === null ? undefined : asFloat(scale),
        softcap: softcap === null ? undefined : asFloat(softcap) } }, feeds);
    return result64(swapMiddle(out.y.data, [b, tq, h, d]), [b, h, tq, d]);
  }
  if (h !== hkv) throw notImplemented('MultiHeadAttention: as many key/value heads as query heads (GroupQueryAttention is causal only)');
  if (softcap !== null) throw notImplemented('MultiHeadAttention has no softcap');
  const inputs = [{ name: 'q', type: 'float32', shape: [b, tq, h * d] }, { name: 'k', type: 'float32', shape: [b, tk, h * d] },
    { name: 'v', type: 'float32', shape: [b, tk, h * dv] }, null, null,
    additive ? { name: 'bias', type: 'float32', shape: [b, h, tq, tk] } : null];
  const feeds = { q: ['float32', bsd(q, [b, h, tq, d]), [b, tq, h * d]], k: ['float32', bsd(k, [b, h, tk, d]), [b, tk, h * d]],
    v: ['float32', bsd(v, [b, h, tk, dv]), [b, tk, h * dv]] };
  if (additive) feeds.bias = ['float32', additive, [b, h, tq, tk]];
  const out = await run({ op: 'MultiHeadAttention', opset: 1, domain: 'com.microsoft', inputs, outputs: [{ name: 'y', type: 'float32' }],
    attributes: { num_heads: h, scale: scale === null ? undefined : asFloat(scale) } }, feeds);
  return result64(swapMiddle(out.y.data, [b, tq, h, dv]), [b, h, tq, dv]);
}

// ------------------------------------------------------------------------------------------- serve
const VERSION = require('onnxruntime-node/package.json').version;
const NAMES = { 'ai.onnx': 'Softmax-13, RotaryEmbedding-23, Attention-23',
  'com.microsoft': 'Softmax-13, com.microsoft RotaryEmbedding, MultiHeadAttention, GroupQueryAttention' };
serve({
  name: `onnxruntime-node ${VERSION} (${OPS})`,
  dtype: 'float32',
  rope_layout: 'half',
  rope_tables: 'input',
  rope_layouts: ['half', 'interleaved'],
  rope_placements: ['first'],
  mrope: [],
  vision_forms: [],
  description: `spec_tests/adapters/onnxruntime_node/adapter.js ${OPS}: ${NAMES[OPS]} on the CPU execution provider, ${THREADS} thread(s)`,
}, { softmax, apply_rope_tables: applyRopeTables, attention }, (lists) => {
  CONTRACT.ropeKeys = new Set(lists.rope_keys);
  CONTRACT.ropeTypes = lists.rope_types;
  CONTRACT.layouts = lists.layouts;
  CONTRACT.placements = lists.placements;
});
