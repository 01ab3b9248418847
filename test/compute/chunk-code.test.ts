import { test } from 'node:test'
import assert from 'node:assert/strict'
import { chunkDocument, CHUNKING_DEFAULTS, languageFor } from '../../compute/chunk/index.ts'
import { scanLines } from '../../compute/chunk/code.ts'
import type { Chunk } from '../../compute/types.ts'

// One top-level unit per language, full of what fools a naive brace counter: braces in strings, comments,
// char literals, raw strings, template literals, regex literals; keyword blocks for Ruby and shell.
const UNITS: Record<string, (i: number) => string> = {
  js: (i) => `// helper ${i} with a brace in a comment {
function f${i}(a, b) {
  const s = "string with } brace and \\" quote";
  const t = \`template \${a + \`nested \${b}\`} with } brace\`;
  const re = /[{]+}/g;
  if (a > b) {
    return s + t + '}' + re.source;
  }
  /* block comment with { */
  return a / b;
}`,
  ts: (i) => `export function f${i}(a: number, b: string): Record<string, { x: number }> {
  const s: string = 'single { quote';
  const r = a / 2 / 3;
  const t = \`\${b} }\`;
  for (const k of [1, 2]) {
    if (k > a) { return { [s + t]: { x: r } }; }
  }
  return {};
}`,
  go: (i) => `// F${i} returns a string {
func F${i}(a int) string {
\traw := \`raw { string
spanning lines }}\`
\tr := '{'
\tif a > 0 {
\t\treturn raw + string(r)
\t}
\treturn "}"
}`,
  java: (i) => `/** Javadoc with { */
@Deprecated
class C${i} {
    char c = '}';
    String s = "{ unbalanced";
    String block = """
        text block with { brace
        """;
    String get() { return s + c + block; }
}`,
  rs: (i) => `/// doc comment {
#[inline]
fn f${i}<'a>(x: &'a str) -> String {
    let r = r#"raw { "quoted" string"#;
    let c = '{';
    let e = '\\'';
    /* nested /* comment { */ still comment } */
    if x.len() > 2 {
        return format!("{}{}{}{}", x, r, c, e);
    }
    String::new()
}`,
  c: (i) => `/* comment { */
static int f${i}(int a) {
    const char *s = "brace { \\" quote";
    char c = '}';
    char d = '\\'';
    if (a > 0) {
        return s[0] + c + d;
    }
    return 0;
}`,
  cpp: (i) => `template <typename T>
T f${i}(T a) {
    const char* r = R"delim(raw { )" string)delim";
    auto l = [](int x) { return x; };
    if (a) {
        return a + l(r[0]);
    }
    return T{};
}`,
  cs: (i) => `[Obsolete]
public static string F${i}(int a)
{
    var v = @"C:\\dir\\ { ""quoted""";
    var s = $"interp {a} }} {{";
    char c = '{';
    if (a > 0) { return v + s + c; }
    return "";
}`,
  rb: (i) => `# comment with def and {
def m${i}(items)
  items.each do |x|
    puts "value #{x} end" if x > 0
  end
  return nil unless items
  while false do
  end
  [1, 2].map { |y| y * 2 }
end`,
  php: (i) => `# hash comment {
function f${i}($a) {
    $s = 'single { quote';
    $t = "double } $a";
    // line comment }
    if ($a) { return $s . $t; }
    return null;
}`,
  swift: (i) => `@discardableResult
func f${i}(_ a: Int) -> String {
    let s = """
    multi { line
    """
    /* nested /* { */ } */
    if a > 0 { return s }
    return "}"
}`,
  kt: (i) => `@JvmStatic
fun f${i}(a: Int): String {
    val s = """raw { $a"""
    val c = '}'
    return if (a > 0) s else c.toString()
}`,
  scala: (i) => `def f${i}(a: Int): String = {
  val s = """triple { quote"""
  val c = '}'
  val sym = 'symbol
  if (a > 0) s else c.toString
}`,
  sh: (i) => `# comment {
f${i}() {
  local x="$1 { brace"
  echo $# \${#x}
  if [ -n "$x" ]; then
    echo 'single } quote' # trailing comment {
  fi
  for i in 1 2; do
    echo "$i"
  done
}`,
  py: (i) => `@decorator
def f${i}(a, b):
    """Docstring with
    def fake(): and { brace
    """
    s = 'quote # not comment'
    d = {
        'k': [1, 2,
              3],
    }
    if a:
        return s
    return d`,
}

const EXTENSIONS: Record<string, string[]> = {
  js: ['js', 'jsx'], ts: ['ts', 'tsx'], go: ['go'], java: ['java'], rs: ['rs'], c: ['c'], cpp: ['cpp', 'cc'], cs: ['cs'],
  rb: ['rb'], php: ['php'], swift: ['swift'], kt: ['kt'], scala: ['scala'], sh: ['sh'], py: ['py'],
}

const codeOpts = (max: number, language: string) => ({ ...CHUNKING_DEFAULTS, code_max_chars: max, min_chunk_chars: 10, kind: 'code' as const, language })

function checkCodeChunks(doc: string, chunks: Chunk[], max: number): void {
  for (const c of chunks) {
    assert.equal(c.text, doc.slice(c.start, c.end))
    assert.ok(c.text.length <= max, `${c.text.length} > ${max}`)
    assert.ok(c.start === 0 || doc[c.start - 1] === '\n', 'starts at a line start')
    assert.ok(c.end === doc.length || /^[ \t]*\r?\n/.test(doc.slice(c.end)) || /^\s*$/.test(doc.slice(c.end)), 'ends at a line end')
  }
}

for (const [family, unit] of Object.entries(UNITS)) {
  test(`code splitter (${family}): top-level units kept whole, nesting back to 0 after each`, () => {
    const units = Array.from({ length: 8 }, (_, i) => unit(i))
    const source = units.join(family === 'go' ? '\n\n' : '\n\n')
    const lang = languageFor(family)!
    assert.ok(lang, `language for ${family}`)
    // the scan: every unit starts at depth 0 outside strings and comments
    const info = scanLines(source, lang)
    let offset = 0
    for (const u of units) {
      const line = info.start.indexOf(offset)
      assert.ok(line >= 0)
      assert.equal(info.depth[line], 0, `${family}: depth at ${JSON.stringify(u.split('\n')[0])}`)
      assert.equal(info.inside[line], false)
      offset += u.length + 2
    }
    const longest = Math.max(...units.map((u) => u.length))
    for (const ext of EXTENSIONS[family]) {
      const max = Math.ceil(longest * 2.2)
      const { chunks } = chunkDocument([{ page_num: 1, page_label: '1', text: source }], codeOpts(max, ext))
      checkCodeChunks(source, chunks, max)
      for (const u of units) assert.ok(chunks.some((c) => c.text.includes(u)), `${ext}: unit kept whole: ${u.split('\n')[1]}`)
      assert.ok(chunks.length < units.length, 'units are merged up to code_max_chars')
    }
  })
}

test('code splitter: a class larger than code_max_chars is split between its methods', () => {
  const methods = (n: number, m: (i: number) => string) => Array.from({ length: n }, (_, i) => m(i))
  const cases: [string, string, string[]][] = []
  const java = methods(8, (i) => `    /** Method ${i}. */\n    public int m${i}(int a) {\n        int b = a * ${i};\n        if (b > 10) {\n            return b - '}';\n        }\n        return b + ${i};\n    }`)
  cases.push(['java', `public class Big {\n    private int x;\n\n${java.join('\n\n')}\n}\n`, java])
  const py = methods(8, (i) => `    def m${i}(self, a):\n        """Method ${i}."""\n        b = a * ${i}\n        if b > 10:\n            return b - 1\n        return [b,\n                ${i}]`)
  cases.push(['py', `class Big:\n    x = 1\n\n${py.join('\n\n')}\n`, py])
  const rb = methods(8, (i) => `  def m${i}(a)\n    b = a * ${i}\n    if b > 10\n      return b - 1\n    end\n    [1].each do |x|\n      b += x\n    end\n    b\n  end`)
  cases.push(['rb', `class Big\n  attr_reader :x\n\n${rb.join('\n\n')}\nend\n`, rb])
  const ts = methods(8, (i) => `  m${i}(a: number): number {\n    const b = a * ${i}\n    if (b > 10) {\n      return b - 1\n    }\n    return b\n  }`)
  cases.push(['ts', `export class Big {\n  private x = 1\n\n${ts.join('\n\n')}\n}\n`, ts])
  for (const [ext, source, parts] of cases) {
    const max = Math.ceil(Math.max(...parts.map((p) => p.length)) * 2.5)
    const { chunks } = chunkDocument([{ page_num: 1, page_label: '1', text: source }], codeOpts(max, ext))
    assert.ok(chunks.length > 2, `${ext}: split`)
    checkCodeChunks(source, chunks, max)
    for (const p of parts) assert.ok(chunks.some((c) => c.text.includes(p.trim())), `${ext}: method kept whole: ${p.split('\n')[0]}`)
  }
})

test('code splitter: a function longer than code_max_chars is cut at its nested blocks and lines', () => {
  const body = Array.from({ length: 40 }, (_, i) => `  if (x > ${i}) {\n    total += ${i};\n  }`).join('\n')
  const source = `function huge(x) {\n  let total = 0;\n${body}\n  return total;\n}\n`
  const max = 200
  const { chunks } = chunkDocument([{ page_num: 1, page_label: '1', text: source }], codeOpts(max, 'js'))
  checkCodeChunks(source, chunks, max)
  // cuts fall between the if-blocks, not inside them
  for (const c of chunks.slice(1)) assert.match(c.text, /^ {2}(if|return|let)|^\}/)
  const covered = chunks.map((c) => c.text).join('\n')
  for (let i = 0; i < 40; i++) assert.ok(covered.includes(`total += ${i};`))
})

test('code splitter: one very long line falls back to spaces, then characters', () => {
  const line = 'var a = [' + Array.from({ length: 300 }, (_, i) => `"item${i}"`).join(', ') + '];'
  const { chunks } = chunkDocument([{ page_num: 1, page_label: '1', text: line }], codeOpts(256, 'js'))
  assert.ok(chunks.length > 5)
  for (const c of chunks) assert.ok(c.text.length <= 256 && c.text === line.slice(c.start, c.end))
  const minified = 'x'.repeat(1000)
  const m = chunkDocument([{ page_num: 1, page_label: '1', text: minified }], codeOpts(256, 'js')).chunks
  assert.equal(m.map((c) => c.text).join(''), minified)
})

test('code splitter: unknown languages use C-family rules; languageFor reads extensions and names', () => {
  assert.equal(languageFor('.py')?.name, 'python')
  assert.equal(languageFor('src/app.tsx')?.name, 'typescript')
  assert.equal(languageFor('Ruby')?.name, 'ruby')
  assert.equal(languageFor('cc')?.name, 'cpp')
  assert.equal(languageFor('.unknown'), undefined)
  const source = 'block a {\n  x\n}\n\nblock b {\n  y\n}\n'
  const { chunks } = chunkDocument([{ page_num: 1, page_label: '1', text: source }], codeOpts(64, 'weird'))
  checkCodeChunks(source, chunks, 64)
  assert.ok(chunks.length >= 1)
})

test('code splitter: CRLF sources and empty files', () => {
  const src = UNITS.c(1) + '\n\n' + UNITS.c(2)
  const crlf = src.replace(/\n/g, '\r\n')
  const { chunks } = chunkDocument([{ page_num: 1, page_label: '1', text: crlf }], codeOpts(300, 'c'))
  checkCodeChunks(crlf, chunks, 300)
  for (const c of chunks) assert.ok(!c.text.endsWith('\r'))
  assert.ok(chunks.some((c) => c.text.includes(UNITS.c(1).replace(/\n/g, '\r\n'))))
  assert.equal(chunkDocument([{ page_num: 1, page_label: '1', text: '' }], codeOpts(300, 'c')).chunks.length, 0)
})
