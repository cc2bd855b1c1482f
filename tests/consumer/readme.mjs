// Type-checks the TypeScript blocks of the user README under `strict` against the package
// installed in tests/consumer from the tarball and @cloudflare/workers-types (hono from the
// root's devDependencies), checks its middleware Options table against the installed
// middleware.d.ts, and the .wasm size it quotes against the installed .wasm. Run by run.sh after the install:
//   node readme.mjs <tests/consumer> <README.md> <tsc>
//
// Fence convention: the info string after `ts` names the context a block compiles in (GitHub
// and npm show only the code).
//   ```ts               a module on its own.
//   ```ts handler       the body of `async function (request: Request, env: Env, ctx:
//                       ExecutionContext): Promise<Response | void>`, where Env binds
//                       LIMITER to RateLimiterServer and LOGIN_LIMITER to
//                       DurableRateLimiterServer (the README's wrangler.toml). Its top-level
//                       `import` and `declare` statements go to module scope.
//   ```ts skip <reason> not compiled, for the reason given (one is required).
//   A ```ts block whose first line is `// <path>: …` shows tests/matrix/app/<path>, which the
//   matrix layer type-checks in projects that have its test tools: here it must be that file,
//   byte for byte.
// A module block that declares a type the package exports must declare the same type (each
// assignable to the other): the README's API listing cannot drift from the .d.ts.
// Any other info string fails, and so do ```typescript, ```tsx, ```js and ```javascript blocks,
// which would escape the check. Broken blocks (CANARIES) go through the same extraction,
// wrapping and tsc run, and each must fail with its expected error: a check that accepts
// them, or finds no block, fails.
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { gzipSync } from 'node:zlib';
import { join, relative, resolve } from 'node:path';

const [consumer, readmePath, tsc] = process.argv.slice(2).map((p) => resolve(p));
const root = resolve(consumer, '../..');
const PKG = '@delightstack/rate-limiter';
const installed = join(consumer, 'node_modules', PKG);
const work = join(consumer, 'readme-blocks');
let checks = 0;
const ok = (message) => {
  checks++;
  console.log(`  ok   ${message}`);
};
const fail = (message) => {
  console.error(`  FAIL ${message}`);
  console.error(`readme: FAILED after ${checks} checks passed`);
  process.exit(1);
};

// ---- extraction ----

const UNCHECKED = new Set(['typescript', 'tsx', 'mts', 'cts', 'js', 'javascript', 'jsx', 'mjs']);

/** The fenced code blocks of `markdown`: `{ lang, info, code, line }` (line: of the first code line). */
function fences(markdown) {
  const lines = markdown.split('\n');
  const blocks = [];
  for (let i = 0; i < lines.length; i++) {
    const open = /^```(\S*)[ \t]*(.*)$/.exec(lines[i]);
    if (!open) continue;
    const end = lines.findIndex((l, j) => j > i && l === '```');
    if (end === -1) throw new Error(`line ${i + 1}: a code block that is never closed`);
    blocks.push({ lang: open[1], info: open[2].trim(), code: lines.slice(i + 1, end).join('\n') + '\n', line: i + 2 });
    i = end;
  }
  return blocks;
}

/** Each ```ts block with how it is checked: `kind` module, handler, skip or matrix. */
function tsBlocks(markdown) {
  const out = [];
  for (const block of fences(markdown)) {
    const where = `line ${block.line - 1}`;
    if (UNCHECKED.has(block.lang)) throw new Error(`${where}: a \`\`\`${block.lang} block would not be type-checked: write it as \`\`\`ts`);
    if (block.lang !== 'ts') continue;
    const shown = /^\/\/ ([\w./-]+\.ts): /.exec(block.code);
    if (shown && block.info === '') out.push({ ...block, kind: 'matrix', path: shown[1] });
    else if (block.info === '') out.push({ ...block, kind: 'module' });
    else if (block.info === 'handler') out.push({ ...block, kind: 'handler' });
    else if (/^skip\s+\S/.test(block.info)) out.push({ ...block, kind: 'skip', reason: block.info.replace(/^skip\s+/, '') });
    else throw new Error(`${where}: unknown fence \`\`\`ts ${block.info} (the contexts are: none, handler, skip <reason>)`);
  }
  return out;
}

// ---- wrapping: each block becomes one module file; map[i] is the README line of its line i+1 ----

const HANDLER_PRELUDE = [
  `import type { DurableRateLimiterServer as ReadmeDurableServer, RateLimiterServer as ReadmeServer } from '${PKG}';`,
  'interface Env {',
  '  LIMITER: DurableObjectNamespace<ReadmeServer>;',
  '  LOGIN_LIMITER: DurableObjectNamespace<ReadmeDurableServer>;',
  '}',
];

function wrap(block, exported) {
  const lines = block.code.replace(/\n$/, '').split('\n');
  const at = (i) => block.line + i;
  if (block.kind === 'module') {
    const src = [...lines.map((text, i) => [text, at(i)]), ['export {};', null]];
    // A type the package exports, declared here, must be that type.
    const declared = [...block.code.matchAll(/^(?:export )?(?:interface|type) (\w+)/gm)].map((m) => m[1]);
    const same = declared.filter((name) => exported.has(name));
    if (same.length) {
      const line = (name) => at(lines.findIndex((l) => new RegExp(`^(?:export )?(?:interface|type) ${name}\\b`).test(l)));
      src.push([`import type * as ReadmePackage from '${PKG}';`, null]);
      src.push(['type ReadmeSame<A, B> = [A] extends [B] ? ([B] extends [A] ? true : false) : false;', null]);
      for (const name of same) src.push([`export const readmeSame${name}: ReadmeSame<${name}, ReadmePackage.${name}> = true; // ${name} as the package declares it`, line(name)]);
    }
    return { src, same };
  }
  // handler: top-level import/declare statements (to the line that ends them) go first.
  const hoisted = [];
  const body = [];
  for (let i = 0; i < lines.length; i++) {
    if (!/^(import|declare) /.test(lines[i])) {
      body.push([`  ${lines[i]}`, at(i)]);
      continue;
    }
    let j = i;
    while (j < lines.length - 1 && !/;\s*(\/\/.*)?$/.test(lines[j])) j++;
    for (let k = i; k <= j; k++) hoisted.push([lines[k], at(k)]);
    i = j;
  }
  return {
    src: [
      ...hoisted,
      ...HANDLER_PRELUDE.map((text) => [text, null]),
      ['export async function handler(request: Request, env: Env, ctx: ExecutionContext): Promise<Response | void> {', null],
      ...body,
      ['}', null],
    ],
    same: [],
  };
}

// ---- the deliberately broken blocks: each must fail with its error, through the same steps ----

const CANARIES = `
\`\`\`ts
// strict is on: an implicit any is an error only under strict (noImplicitAny).
export const half = (n) => n / 2;
\`\`\`

\`\`\`ts handler
const d = await env.LIMITER.get(env.LIMITER.idFromName('k')).limit('k');
const wait: number = d.retry_after_ms; // null when no wait can help
\`\`\`

\`\`\`ts handler
import { rateLimitHeaders } from '${PKG}';
declare const apiKey: string;

const stub = env.LIMITER.get(env.LIMITER.idFromName(apiKey));
return new Response(null, { headers: rateLimitHeaders(await stub.getStatus('k')) });
\`\`\`

\`\`\`ts
import { rateLimit } from '${PKG}/middleware';

rateLimit({ binding: 'LIMITER', policy: { max_token: 10 } });
\`\`\`

\`\`\`ts
export interface RateLimiterStatus { remaining: number; limit: number }
\`\`\`
`;
const CANARY_ERRORS = ['TS7006', 'TS2322', 'TS2345', 'TS2353', 'TS2322'];

// ---- the run ----

let readme;
try {
  readme = readFileSync(readmePath, 'utf8');
} catch (error) {
  fail(`cannot read ${readmePath}: ${error.message}`);
}

// The convention's own refusals.
for (const [bad, why] of [
  ['```ts skip\nlet x = 1;\n```\n', 'a skip without a reason'],
  ['```ts wibble\nlet x = 1;\n```\n', 'an unknown context'],
  ['```js\nlet x = 1;\n```\n', 'a ```js block'],
  ['```ts\nlet x = 1;\n', 'an unclosed block'],
]) {
  let refused = false;
  try {
    tsBlocks(bad);
  } catch {
    refused = true;
  }
  if (!refused) fail(`the fence parser accepted ${why}`);
}
ok('the fence parser refuses a skip without a reason, an unknown context, a ```js block and an unclosed block');

let blocks;
try {
  blocks = tsBlocks(readme);
} catch (error) {
  fail(`${relative(root, readmePath)}: ${error.message}`);
}
const canaries = tsBlocks(CANARIES);
if (canaries.length !== CANARY_ERRORS.length) fail(`${canaries.length} canaries for ${CANARY_ERRORS.length} expected errors`);

const byKind = (kind) => blocks.filter((b) => b.kind === kind);
const compiled = blocks.filter((b) => b.kind === 'module' || b.kind === 'handler');
if (compiled.length === 0) fail(`found no TypeScript block to compile in ${relative(root, readmePath)}`);

// Blocks shown from tests/matrix/app: the matrix compiles them; they must be those files.
for (const block of byKind('matrix')) {
  const file = join(root, 'tests/matrix/app', block.path);
  if (!existsSync(file)) fail(`line ${block.line - 1}: the block shows ${block.path}, which tests/matrix/app does not have`);
  if (readFileSync(file, 'utf8') !== block.code) fail(`line ${block.line - 1}: the block differs from tests/matrix/app/${block.path}`);
}
ok(`${byKind('matrix').length} blocks show files of tests/matrix/app byte for byte (the matrix layer type-checks them): ${byKind('matrix').map((b) => b.path).join(', ')}`);
for (const block of byKind('skip')) console.log(`       skipped line ${block.line - 1}: ${block.reason}`);

// The names the package's two entries export: a README type of one of these names is checked.
const require = createRequire(join(root, 'package.json'));
const ts = require('typescript');
const program = ts.createProgram([join(installed, 'index.d.ts'), join(installed, 'middleware.d.ts')], {
  types: ['@cloudflare/workers-types'],
  typeRoots: [join(root, 'node_modules/@cloudflare'), join(root, 'node_modules/@types')],
  strict: true,
  noEmit: true,
  moduleResolution: ts.ModuleResolutionKind.Bundler,
  module: ts.ModuleKind.ESNext,
  target: ts.ScriptTarget.ESNext,
});
const checker = program.getTypeChecker();
const exportsOf = (file) => checker.getExportsOfModule(checker.getSymbolAtLocation(program.getSourceFile(join(installed, file))));
const mainExports = new Set(exportsOf('index.d.ts').map((s) => s.name));

rmSync(work, { recursive: true, force: true });
mkdirSync(work);
const files = [];
const write = (block, name) => {
  const { src, same } = wrap(block, mainExports);
  const file = join(work, `${name}.ts`);
  writeFileSync(file, src.map(([text]) => text).join('\n') + '\n');
  files.push({ block, file, map: src.map(([, line]) => line), same });
};
compiled.forEach((block, i) => write(block, `block-${String(i + 1).padStart(2, '0')}-line-${block.line - 1}`));
canaries.forEach((block, i) => write(block, `canary-${i + 1}`));
writeFileSync(join(work, 'tsconfig.json'), JSON.stringify({ extends: '../tsconfig.json', include: ['*.ts'] }));

// One tsc run over every block and canary: exits non-zero (the canaries), so its diagnostics decide.
let out = '';
try {
  out = execFileSync(tsc, ['--noEmit', '-p', work, '--listFiles', '--pretty', 'false'], { encoding: 'utf8' });
} catch (error) {
  out = `${error.stdout ?? ''}${error.stderr ?? ''}`;
}
const listed = out.split('\n').filter((l) => l.startsWith('/'));
for (const types of ['index.d.ts', 'middleware.d.ts']) {
  if (!listed.includes(join(installed, types))) fail(`tsc did not take ${types} from tests/consumer/node_modules/${PKG}`);
}
if (!listed.some((f) => f.includes('@cloudflare/workers-types/'))) fail('tsc did not load @cloudflare/workers-types');
const strictOn = ts.readConfigFile(join(consumer, 'tsconfig.json'), ts.sys.readFile).config?.compilerOptions?.strict === true;
if (!strictOn) fail('tests/consumer/tsconfig.json does not set strict');
ok(`tsc --strict took the package's types from tests/consumer/node_modules/${PKG} and @cloudflare/workers-types`);

const diagnostics = [...out.matchAll(/^(\S+?\.ts)\((\d+),(\d+)\): error (TS\d+): (.*)$/gm)].map((m) => ({
  file: resolve(m[1]), line: Number(m[2]), code: m[4], message: m[5],
}));
if (diagnostics.length === 0) fail(`tsc reported no error at all, not even for the canaries:\n${out.split('\n').filter((l) => !l.startsWith('/')).join('\n')}`);
const unplaced = diagnostics.filter((d) => !files.some((f) => f.file === d.file));
if (unplaced.length) fail(`tsc errors outside the blocks:\n${unplaced.map((d) => `${d.file}(${d.line}): ${d.code} ${d.message}`).join('\n')}`);

const readmeName = relative(root, readmePath);
const broken = [];
for (const f of files.filter((x) => !x.file.includes('canary-'))) {
  for (const d of diagnostics.filter((x) => x.file === f.file)) {
    const line = f.map[d.line - 1];
    const same = /^export const readmeSame(\w+)/.exec(readFileSync(f.file, 'utf8').split('\n')[d.line - 1]);
    if (same) d.message = `${same[1]} is not the package's ${same[1]} (${d.message})`;
    broken.push(`${readmeName}:${line ?? `(the ${f.block.kind} wrapper of the block at line ${f.block.line - 1})`}: ${d.code} ${d.message}`);
  }
}
if (broken.length) fail(`README TypeScript blocks that tsc --strict rejects:\n${broken.join('\n')}`);
const handlers = byKind('handler').length;
ok(`${compiled.length} README TypeScript blocks compile under strict (${compiled.length - handlers} modules, ${handlers} handler bodies; ${byKind('skip').length} skipped, each with its reason)`);
const sameTypes = files.filter((f) => !f.file.includes('canary-')).flatMap((f) => f.same);
ok(`the README declares ${sameTypes.length} types as the package does (each assignable to the other): ${sameTypes.join(', ') || 'none'}`);

files.filter((x) => x.file.includes('canary-')).forEach((f, i) => {
  const got = diagnostics.filter((d) => d.file === f.file);
  const inBlock = got.filter((d) => f.map[d.line - 1] !== null);
  if (got.length === 0 || got.some((d) => d.code !== CANARY_ERRORS[i]) || inBlock.length !== got.length) {
    fail(`canary ${i + 1} (${f.block.kind}) must fail with ${CANARY_ERRORS[i]} inside the block, tsc said: ${got.map((d) => `${d.code} ${d.message}`).join('; ') || 'nothing'}`);
  }
});
ok(`tsc rejects each of the ${canaries.length} broken blocks run through the same steps, with its expected error (${CANARY_ERRORS.join(', ')})`);

// ---- the middleware Options table against RateLimitMiddlewareOptions ----

// A row whose cell lists fields (`{ a?, b }`) names the fields of this type.
const ROW_TYPES = { policy: 'RateLimitPolicy', local: 'LocalLimitsOptions', concurrency: 'RateLimitConcurrency' };

/** `{ name: optional }` of an exported interface of middleware.d.ts, inherited fields included. */
function fieldsOf(name) {
  const symbol = exportsOf('middleware.d.ts').find((s) => s.name === name);
  if (!symbol) fail(`middleware.d.ts exports no ${name}`);
  const type = checker.getDeclaredTypeOfSymbol(symbol);
  return Object.fromEntries(checker.getPropertiesOfType(type).map((p) => [p.name, (p.flags & ts.SymbolFlags.Optional) !== 0]));
}
const show = (fields) => Object.entries(fields).map(([n, optional]) => `${n}${optional ? '?' : ''}`).sort().join(', ');

function checkOptionsTable(markdown) {
  const section = /^### Options\n([^]*?)(?=^#)/m.exec(markdown);
  if (!section) return ['no "### Options" section'];
  const rows = section[1].split('\n').filter((l) => /^\| `/.test(l)).map((l) => l.split(' | ').map((c) => c.replace(/^\| |\s*\|$/g, '')));
  const problems = [];
  const table = Object.fromEntries(rows.map(([option, dflt]) => [option.replace(/`/g, ''), dflt.trim() !== 'required']));
  const options = fieldsOf('RateLimitMiddlewareOptions');
  if (show(table) !== show(options)) {
    problems.push(`the table's options (? = optional) are\n    ${show(table)}\n  RateLimitMiddlewareOptions has\n    ${show(options)}`);
  }
  const declared = (option) => {
    const p = checker.getPropertiesOfType(checker.getDeclaredTypeOfSymbol(exportsOf('middleware.d.ts').find((s) => s.name === 'RateLimitMiddlewareOptions'))).find((x) => x.name === option);
    return p?.valueDeclaration?.type?.getText() ?? '';
  };
  for (const row of rows) {
    const option = row[0].replace(/`/g, '');
    const list = /`\{ ([^}`]*) \}`/.exec(row.slice(1).join(' | '));
    if (!list) continue;
    const typeName = ROW_TYPES[option];
    if (!typeName) {
      problems.push(`the ${option} row lists fields, and the check does not know their type (ROW_TYPES in tests/consumer/readme.mjs)`);
      continue;
    }
    if (!new RegExp(`\\b${typeName}\\b`).test(declared(option))) problems.push(`${option} is declared as ${declared(option)}, not as ${typeName}`);
    const fields = Object.fromEntries(list[1].split(',').map((f) => f.trim()).map((f) => [f.replace(/\?$/, ''), f.endsWith('?')]));
    const want = fieldsOf(typeName);
    if (show(fields) !== show(want)) problems.push(`the ${option} row lists { ${show(fields)} }, ${typeName} has { ${show(want)} }`);
  }
  return { problems, rows: rows.length, lists: rows.filter((r) => /`\{ /.test(r.slice(1).join())).length };
}

const table = checkOptionsTable(readme);
if (Array.isArray(table) || table.problems.length) fail(`the middleware Options table of ${readmeName}:\n  ${(table.problems ?? table).join('\n  ')}`);
ok(`the Options table's ${table.rows} options are RateLimitMiddlewareOptions's, required and optional alike, and its ${table.lists} field lists (policy, local, concurrency) are their types' fields`);
// The same check on a table with the options as before the fix must fail.
const stale = readme.replace(/^\| `policy` \| [^|]+\|/m, '| `policy` | required |');
const staleResult = checkOptionsTable(stale);
if (stale === readme || !staleResult.problems?.length) fail('the Options table check accepted `policy` marked required');
ok('the Options table check rejects a table that marks `policy` required');

// ---- the .wasm size the Performance section quotes ----

/** Problems of the README's `.wasm` line against the installed .wasm (within 2 KB each). */
function checkWasmSize(markdown) {
  const quoted = /^- `\.wasm`: ([\d,]+) bytes raw, ([\d,]+) bytes with `gzip -9`/m.exec(markdown);
  if (!quoted) return ['no "- `.wasm`: N bytes raw, M bytes with `gzip -9`" line'];
  const [raw, gzip] = [quoted[1], quoted[2]].map((n) => Number(n.replace(/,/g, '')));
  const wasm = readFileSync(join(installed, 'rate_limiter_bg.wasm'));
  const built = { raw: wasm.length, gzip: gzipSync(wasm, { level: 9 }).length };
  const problems = [];
  if (Math.abs(raw - built.raw) > 2048) problems.push(`quotes ${raw} bytes raw, the package's is ${built.raw}`);
  if (Math.abs(gzip - built.gzip) > 2048) problems.push(`quotes ${gzip} bytes with gzip -9, the package's is ${built.gzip}`);
  return problems;
}

const sizeProblems = checkWasmSize(readme);
if (sizeProblems.length) fail(`the .wasm size in ${readmeName}: ${sizeProblems.join('; ')} (more than 2 KB apart)`);
ok(`the .wasm size ${readmeName} quotes is the installed package's, within 2 KB raw and with gzip -9`);
if (checkWasmSize(readme.replace(/^(- `\.wasm`: )[\d,]+/m, '$1112,000')).length === 0) fail('the .wasm size check accepted 112,000 bytes');
ok('the .wasm size check rejects a size 2 KB or more away from the package\'s');

rmSync(work, { recursive: true, force: true });
console.log(`readme: ${checks} checks passed`);
