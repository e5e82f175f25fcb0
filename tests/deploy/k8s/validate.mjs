#!/usr/bin/env node
// SPDX-License-Identifier: Apache-2.0
// validate.mjs [--subst NAME=VALUE]... FILE...
//
// Checks Kubernetes manifests offline, the way the API server would take them: parses every YAML
// document of each FILE ("-" for stdin) as YAML 1.1 (what kubectl's parser reads: `yes` is a
// boolean there) and checks each object:
//   - built-in kinds of GA API versions (v1, apps/v1, rbac.authorization.k8s.io/v1, ...): the
//     Kubernetes OpenAPI schema through kubernetes-models, made strict (unknown fields are
//     errors; see strict.mjs);
//   - NetworkAttachmentDefinition (k8s.cni.cncf.io/v1) and nv-ipam's IPPool
//     (nv-ipam.nvidia.com/v1alpha1): the schemas of their CRDs and more (crds.mjs);
//   - any other kind, or a beta/alpha API version, is an error;
//   - and for all: metadata.name a DNS-1123 subdomain (a DNS label for Namespace and Service),
//     metadata.namespace a DNS label, label keys and values and annotation keys well formed.
// --subst NAME=VALUE replaces ${NAME} in the text of every FILE before parsing, for templates
// whose placeholders a script fills in.
// Prints one line per object: "ok FILE[DOC] KIND/NAME" or "FAIL FILE[DOC] KIND/NAME: PATH: WHY; ...",
// and exits 1 when anything failed, 2 on a usage error.
import { readFileSync } from "node:fs";
import { parseAllDocuments } from "yaml";
import { customResource } from "./crds.mjs";
import { pointer, validateModel } from "./strict.mjs";

const dnsLabel = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
const dnsSubdomain = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;
const qualifiedName = /^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$/;
const labelValue = /^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$/;
// Kinds whose names are DNS labels rather than subdomains.
const labelNamedKinds = new Set(["v1/Namespace", "v1/Service"]);

function usage(message) {
  if (message) console.error(`validate.mjs: ${message}`);
  console.error("usage: validate.mjs [--subst NAME=VALUE]... FILE...");
  process.exit(2);
}

function isObject(v) {
  return v !== null && typeof v === "object" && !Array.isArray(v);
}

// Problems of a qualified name (label or annotation key): [prefix/]name.
function checkKey(key) {
  const slash = key.lastIndexOf("/");
  const prefix = slash >= 0 ? key.slice(0, slash) : undefined;
  const name = slash >= 0 ? key.slice(slash + 1) : key;
  if (prefix !== undefined && (prefix.length > 253 || !dnsSubdomain.test(prefix))) {
    return "prefix is not a DNS-1123 subdomain";
  }
  if (name.length > 63 || !qualifiedName.test(name)) {
    return "not a qualified name (at most 63 of A-Z a-z 0-9 - _ ., alphanumeric at both ends)";
  }
  return undefined;
}

function checkMetadata(obj, kindKey) {
  const problems = [];
  const md = obj.metadata;
  if (!isObject(md)) {
    return [{ path: "/metadata", message: "required, an object" }];
  }
  if (md.name === undefined && md.generateName === undefined) {
    problems.push({ path: "/metadata/name", message: "required field missing" });
  } else if (typeof md.name === "string") {
    const re = labelNamedKinds.has(kindKey) ? dnsLabel : dnsSubdomain;
    const max = labelNamedKinds.has(kindKey) ? 63 : 253;
    if (md.name.length > max || !re.test(md.name)) {
      problems.push({
        path: "/metadata/name",
        message: `'${md.name}' is not a DNS-1123 ${re === dnsLabel ? "label" : "subdomain"} (lower case letters, digits, '-'${re === dnsLabel ? "" : ", '.'"})`,
      });
    }
  }
  if (typeof md.namespace === "string" && (md.namespace.length > 63 || !dnsLabel.test(md.namespace))) {
    problems.push({ path: "/metadata/namespace", message: `'${md.namespace}' is not a DNS-1123 label` });
  }
  for (const field of ["labels", "annotations"]) {
    if (!isObject(md[field])) continue;
    for (const [key, value] of Object.entries(md[field])) {
      const why = checkKey(key);
      if (why) problems.push({ path: `/metadata/${field}/${pointer(key)}`, message: `key: ${why}` });
      if (field === "labels" && typeof value === "string" && (value.length > 63 || !labelValue.test(value))) {
        problems.push({ path: `/metadata/labels/${pointer(key)}`, message: `'${value}' is not a label value` });
      }
    }
  }
  return problems;
}

// The kubernetes-models class of a built-in kind, or a string saying why there is none.
async function builtinModel(apiVersion, kind) {
  const m = apiVersion.match(/^(?:([a-z0-9.-]+)\/)?(v[0-9]+(?:(alpha|beta)[0-9]+)?)$/);
  if (!m || !/^[A-Z][A-Za-z0-9]*$/.test(kind)) return "unknown kind";
  let mod;
  try {
    mod = await import(`kubernetes-models/${apiVersion}/${kind}`);
  } catch {
    return "unknown kind";
  }
  const Model = mod[kind];
  if (!Model || Model.apiVersion !== apiVersion || Model.kind !== kind) return "unknown kind";
  if (m[3]) return `${apiVersion} is a pre-release API version, removed or off by default in current Kubernetes: use the GA version`;
  return Model;
}

async function checkObject(obj) {
  if (!isObject(obj)) return [{ path: "", message: "not a mapping" }];
  const { apiVersion, kind } = obj;
  if (typeof apiVersion !== "string" || typeof kind !== "string") {
    return [{ path: typeof apiVersion !== "string" ? "/apiVersion" : "/kind", message: "required, a string" }];
  }
  const kindKey = `${apiVersion}/${kind}`;
  const custom = customResource(apiVersion, kind);
  let problems;
  if (custom) {
    problems = custom(obj);
  } else {
    const Model = await builtinModel(apiVersion, kind);
    if (typeof Model === "string") return [{ path: "/kind", message: `${kindKey}: ${Model}` }];
    problems = validateModel(Model, obj);
  }
  problems.push(...checkMetadata(obj, kindKey));
  return problems;
}

// Merges problems per path, keeping the first of equal messages, in order.
function summarize(problems) {
  const byPath = new Map();
  for (const { path, message } of problems) {
    const list = byPath.get(path) || [];
    if (!list.includes(message)) list.push(message);
    byPath.set(path, list);
  }
  return [...byPath].map(([path, messages]) => `${path || "/"}: ${messages.join(", ")}`).join("; ");
}

async function main(argv) {
  const subst = new Map();
  const files = [];
  for (let i = 0; i < argv.length; i++) {
    if (argv[i] === "--subst") {
      const m = (argv[++i] || "").match(/^([A-Za-z_][A-Za-z0-9_]*)=(.*)$/s);
      if (!m) usage("--subst needs NAME=VALUE");
      subst.set(m[1], m[2]);
    } else if (argv[i] === "--") {
      files.push(...argv.slice(i + 1));
      break;
    } else if (argv[i].startsWith("-") && argv[i] !== "-") {
      usage(`unknown option ${argv[i]}`);
    } else {
      files.push(argv[i]);
    }
  }
  if (files.length === 0) usage("no FILE");

  let failed = 0;
  let passed = 0;
  const report = (ok, where, text) => {
    console.log(`${ok ? "ok  " : "FAIL"} ${where}${text}`);
    if (ok) passed++;
    else failed++;
  };
  for (const file of files) {
    let text;
    try {
      text = readFileSync(file === "-" ? 0 : file, "utf8");
    } catch (err) {
      report(false, file, `: cannot read: ${err.message}`);
      continue;
    }
    for (const [name, value] of subst) text = text.split(`\${${name}}`).join(value);
    const docs = parseAllDocuments(text, { version: "1.1", prettyErrors: true });
    if (!Array.isArray(docs)) {
      report(false, file, ": not YAML documents");
      continue;
    }
    let objects = 0;
    for (const [i, doc] of docs.entries()) {
      const where = `${file}[${i}]`;
      if (doc.errors.length > 0) {
        report(false, where, `: YAML: ${doc.errors.map((e) => e.message.split("\n")[0].replace(/:$/, "")).join("; ")}`);
        objects++;
        continue;
      }
      const obj = doc.toJS({ maxAliasCount: 100 });
      if (obj === null || obj === undefined) continue; // an empty document (comments only)
      objects++;
      // A v1 List holds objects in items.
      const items =
        isObject(obj) && obj.apiVersion === "v1" && obj.kind === "List" && Array.isArray(obj.items)
          ? obj.items.map((item, j) => [`${where}/items/${j}`, item])
          : [[where, obj]];
      for (const [at, item] of items) {
        const id = isObject(item)
          ? `${item.kind ?? "?"}/${(isObject(item.metadata) && item.metadata.name) || "?"}`
          : "?";
        const problems = await checkObject(item);
        report(problems.length === 0, `${at} ${id}`, problems.length ? `: ${summarize(problems)}` : "");
      }
    }
    if (objects === 0) report(false, file, ": no Kubernetes object in it");
  }
  return failed === 0 ? 0 : 1;
}

process.exitCode = await main(process.argv.slice(2));
