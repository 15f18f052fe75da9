// Writes ../static/iqp.sha256: the hash of every source file here (node_modules excluded) and
// of the built bundle. tests/ui/test_bundle.py recomputes both without Node, so a change of
// the sources that was not rebuilt, or a hand-edited bundle, fails the tests.
import { createHash } from "node:crypto";
import { readdirSync, readFileSync, writeFileSync } from "node:fs";
import { join, relative, sep } from "node:path";
import { fileURLToPath } from "node:url";

const www = fileURLToPath(new URL("..", import.meta.url));
const staticDir = join(www, "..", "static");

function files(dir) {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return entry.name === "node_modules" ? [] : files(path);
    return [path];
  });
}

const sources = createHash("sha256");
const names = files(www).map((path) => relative(www, path).split(sep).join("/")).sort();
for (const name of names) {
  sources.update(name, "utf8");
  sources.update("\0");
  sources.update(readFileSync(join(www, name)));
  sources.update("\0");
}
const bundle = createHash("sha256").update(readFileSync(join(staticDir, "iqp.umd.js"))).digest("hex");
writeFileSync(join(staticDir, "iqp.sha256"), `sources ${sources.digest("hex")}\nbundle ${bundle}\n`);
console.log(`hashed ${names.length} source files and the bundle into static/iqp.sha256`);
