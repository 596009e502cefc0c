// npm test: every test file under dist/, each in a process of its own with its own control
// plane, two at a time, the longest first: node --test starts files in the order given, so the
// suite ends with the longest file, not with a long one begun last (in name order the real
// node's 300 s file came last). Three at a time was measured slower on a cold run: the cores
// are already full there, and each more file keeps one more cluster busy (docs/development.md).
import { readdirSync } from "node:fs";
import { join } from "node:path";
import { spawnSync } from "node:child_process";

const dir = "dist/tests/nodejs/src";
const concurrency = 2;
// The files that take minutes, longest first (warm figures in docs/development.md); the rest
// follow in name order. A file missing here still runs: it only starts later.
const longest = ["autogate.test.js", "realnode.test.js", "fieldreports.test.js", "autogate.corpus.test.js", "examples.test.js", "crd.test.js"];

const all = readdirSync(dir).filter((f) => f.endsWith(".test.js"));
const order = [...longest.filter((f) => all.includes(f)), ...all.filter((f) => !longest.includes(f)).sort()];
const r = spawnSync(process.execPath, ["--test", `--test-concurrency=${concurrency}`, ...order.map((f) => join(dir, f))], { stdio: "inherit" });
process.exit(r.status ?? 1);
