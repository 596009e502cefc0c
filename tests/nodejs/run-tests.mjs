// npm test: every test file under dist/, each in a process of its own with its own control
// plane, `concurrency` at a time, the longest first. The files mostly wait on their clusters
// (a whole file takes 5-7 minutes of which a fraction is CPU), so more run at once than there
// are cores; started longest first, the suite ends with the longest file, not with a long one
// begun last (node --test starts files in the order given).
import { readdirSync } from "node:fs";
import { join } from "node:path";
import { spawnSync } from "node:child_process";

const dir = "dist/tests/nodejs/src";
const concurrency = 3;
// The files that take minutes, longest first (warm figures in docs/development.md); the rest
// follow in name order. A file missing here still runs: it only starts later.
const longest = ["autogate.test.js", "realnode.test.js", "fieldreports.test.js", "autogate.corpus.test.js", "examples.test.js", "crd.test.js"];

const all = readdirSync(dir).filter((f) => f.endsWith(".test.js"));
const order = [...longest.filter((f) => all.includes(f)), ...all.filter((f) => !longest.includes(f)).sort()];
const r = spawnSync(process.execPath, ["--test", `--test-concurrency=${concurrency}`, ...order.map((f) => join(dir, f))], { stdio: "inherit" });
process.exit(r.status ?? 1);
