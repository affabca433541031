// Reference GPT-2 tokenization for the tokenizer tests, by js-tiktoken (an independent
// implementation that ships GPT-2's ranks).
//
//   node reference_tokenize.mjs NODE_MODULES_DIR < in.jsonl > out.txt
//
// Each input line is JSON: a string (the text), or {"base64": "..."} (raw bytes, decoded
// to text with U+FFFD replacement as Python's errors="replace" does). Each output line is
// the ids of encode_ordinary (special-token text is ordinary text), space-separated,
// followed by " | " and the number of U+FFFD replacements made when decoding bytes.
//
// JavaScript's \s differs from tiktoken's (Unicode White_Space: JS adds U+FEFF and lacks
// U+0085), so the pattern spells \s out as White_Space, as sps does.
import { createRequire } from "node:module";
import { createInterface } from "node:readline";
import path from "node:path";

const modules = process.argv[2];
if (!modules) {
  console.error("usage: node reference_tokenize.mjs NODE_MODULES_DIR");
  process.exit(2);
}
const require = createRequire(path.join(modules, "index.js"));
const { Tiktoken } = require("js-tiktoken/lite");
const gpt2 = require("js-tiktoken/ranks/gpt2");
const ranks = gpt2.default ?? gpt2;

const WS = "\\u{9}-\\u{D}\\u{20}\\u{85}\\u{A0}\\u{1680}\\u{2000}-\\u{200A}\\u{2028}\\u{2029}\\u{202F}\\u{205F}\\u{3000}";
const pattern =
  `'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^${WS}\\p{L}\\p{N}]+|[${WS}]+(?![^${WS}])|[${WS}]+`;
if (ranks.pat_str !== "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+") {
  console.error("reference_tokenize: js-tiktoken's gpt2 pattern is not GPT-2's");
  process.exit(1);
}
const encoder = new Tiktoken({ ...ranks, pat_str: pattern });
const decoder = new TextDecoder("utf-8", { fatal: false, ignoreBOM: true });

const lines = createInterface({ input: process.stdin, crlfDelay: Infinity });
const out = [];
for await (const line of lines) {
  if (line === "") continue;
  const item = JSON.parse(line);
  let text = item;
  let replacements = 0;
  if (typeof item !== "string") {
    text = decoder.decode(Buffer.from(item.base64, "base64"));
    replacements = (text.match(/\uFFFD/g) || []).length;
  }
  // allowedSpecial [] and disallowedSpecial []: <|endoftext|> is ordinary text.
  const ids = encoder.encode(text, [], []);
  out.push(ids.join(" ") + " | " + replacements);
}
process.stdout.write(out.join("\n") + (out.length ? "\n" : ""));
