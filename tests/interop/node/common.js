'use strict';
// Shared helpers for the ali-ons interop scripts: one JSON config argument in, JSON lines out.
// Every line on stdout is one event object; pytest (tests/interop/test_ali_ons.py) parses them.

const crypto = require('crypto');

function readConfig() {
  const raw = process.argv[2];
  if (!raw) {
    throw new Error('usage: node <script> \'{"nameSrv": "127.0.0.1:9876", ...}\'');
  }
  return JSON.parse(raw);
}

function emit(event, fields) {
  process.stdout.write(JSON.stringify(Object.assign({ event }, fields)) + '\n');
}

function sha1(buf) {
  return crypto.createHash('sha1').update(buf).digest('hex');
}

// A deterministic body of `size` bytes that still compresses (so the zlib path is used, not skipped).
function makeBody(text, size) {
  if (!size || size <= Buffer.byteLength(text)) {
    return Buffer.from(text);
  }
  const unit = Buffer.from(text + '|');
  const out = Buffer.alloc(size);
  for (let i = 0; i < size; i += unit.length) {
    unit.copy(out, i, 0, Math.min(unit.length, size - i));
  }
  return out;
}

// Quiet logger: ali-ons logs a lot at INFO; only warnings and errors go to stderr.
const logger = {
  debug() {},
  info() {},
  warn(...args) { console.error('[ali-ons warn]', ...args); },
  error(...args) { console.error('[ali-ons error]', ...args); },
};

module.exports = { readConfig, emit, sha1, makeBody, logger };
