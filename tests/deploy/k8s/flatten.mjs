// SPDX-License-Identifier: Apache-2.0
// flatten.mjs FILE...: prints every scalar of the YAML documents of each FILE as one line
//   DOC PATH=JSON
// (DOC counts the non-empty documents from 0 over all files; a list whose items all have a string
// "name" is indexed by it: /spec/template/spec/containers[ibcni-install]/env[IBCNI_LOG_LEVEL]/value="info"),
// sorted, so that shell tests can compare parsed manifests (diff) and pick values (grep -Fx)
// whatever their formatting, comments and key order. YAML 1.1, as kubectl reads it.
// flatten.mjs --json FILE...: prints each non-empty document as one line of JSON instead (keys and
// list items in their order), for an exact comparison of parsed documents.
// --kind KIND (before the files, with or without --json): only the documents of that kind (DOC
// then counts those), e.g. the DaemonSet of a chart's render that also holds its RBAC objects.
import { readFileSync } from "node:fs";
import { parseAllDocuments } from "yaml";

const lines = [];
function walk(doc, path, value) {
  if (Array.isArray(value)) {
    const named = value.length > 0 && value.every((v) => v && typeof v === "object" && typeof v.name === "string");
    if (value.length === 0) lines.push(`${doc} ${path}=[]`);
    value.forEach((v, i) => walk(doc, named ? `${path}[${v.name}]` : `${path}/${i}`, v));
  } else if (value !== null && typeof value === "object") {
    const keys = Object.keys(value);
    if (keys.length === 0) lines.push(`${doc} ${path}={}`);
    for (const k of keys) walk(doc, `${path}/${k}`, value[k]);
  } else {
    lines.push(`${doc} ${path}=${JSON.stringify(value)}`);
  }
}

let n = 0;
let status = 0;
const args = process.argv.slice(2);
let json = false;
let kind;
while (args[0] === "--json" || args[0] === "--kind") {
  if (args.shift() === "--json") json = true;
  else kind = args.shift();
}
for (const file of args) {
  for (const d of parseAllDocuments(readFileSync(file, "utf8"), { version: "1.1" })) {
    if (d.errors.length) {
      console.error(`flatten.mjs: ${file}: ${d.errors[0].message}`);
      status = 1;
      continue;
    }
    const v = d.toJS();
    if (v === null || v === undefined) continue;
    if (kind !== undefined && v.kind !== kind) continue;
    if (json) lines.push(JSON.stringify(v));
    else walk(n++, "", v);
  }
}
console.log((json ? lines : lines.sort()).join("\n"));
process.exitCode = status;
