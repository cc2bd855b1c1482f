// Setup file of the Node suite's second run (the `no-finalizers` project in vitest.config.ts):
// the runtime of a Worker whose compatibility date is before 2025-05-05, which has no
// FinalizationRegistry. Runs before each test file imports the package, so the package loads
// without it and frees idle limiters by its own sweep (docs/SPEC.md, section 5).
Reflect.deleteProperty(globalThis, 'FinalizationRegistry');
if ('FinalizationRegistry' in globalThis) throw new Error('FinalizationRegistry could not be removed');
