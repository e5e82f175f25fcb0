#!/usr/bin/env node
// SPDX-License-Identifier: Apache-2.0
// A Kubernetes API emulator for the tests of ibcni-ipam's kubernetes backend: coordination.k8s.io/v1
// Leases in namespaces, v1 Nodes (read-only to clients), bearer-token and client-certificate
// authentication with a small RBAC table, every object stored in a real etcd through its v3 JSON
// gateway (resourceVersion = the key's mod_revision, as kube-apiserver does), every request body
// validated against the Kubernetes OpenAPI schemas of kubernetes-models. See README.md.
//
// node server.js --etcd URL[,URL...] --tokens FILE --rbac FILE --models DIR [--port N] [--host ADDR]
//                [--prefix /registry] [--etcd-timeout-ms N] [--validation-log FILE]
//                [--tls-cert FILE --tls-key FILE [--client-ca FILE]]
// Prints the port it listens on (one line) on stdout once it accepts connections.
// --models DIR: where tests/deploy/k8s/setup.sh installed kubernetes-models (DIR/node_modules,
// DIR/strict.mjs); defaults to $K8S_EMULATOR_MODELS.
"use strict";
const fs = require("node:fs");
const http = require("node:http");
const https = require("node:https");
const path = require("node:path");
const crypto = require("node:crypto");
const { createRequire } = require("node:module");
const { pathToFileURL } = require("node:url");

// ---------------------------------------------------------------------------------------------
// Command line
function usage(msg) {
  if (msg) console.error(`k8s-emulator: ${msg}`);
  console.error(
    "usage: server.js --etcd URL[,URL...] --tokens FILE --rbac FILE --models DIR [--port N] [--host ADDR]\n" +
      "       [--prefix /registry] [--etcd-timeout-ms N] [--validation-log FILE]\n" +
      "       [--tls-cert FILE --tls-key FILE [--client-ca FILE]]",
  );
  process.exit(2);
}
const opts = {
  port: 0,
  host: "127.0.0.1",
  prefix: "/registry",
  etcdTimeoutMs: 3000,
  models: process.env.K8S_EMULATOR_MODELS || "",
};
{
  const names = {
    "--etcd": "etcd", "--port": "port", "--host": "host", "--tokens": "tokens", "--rbac": "rbac",
    "--prefix": "prefix", "--etcd-timeout-ms": "etcdTimeoutMs", "--validation-log": "validationLog",
    "--tls-cert": "tlsCert", "--tls-key": "tlsKey", "--client-ca": "clientCa", "--models": "models",
  };
  const argv = process.argv.slice(2);
  for (let i = 0; i < argv.length; i++) {
    const key = names[argv[i]];
    if (!key) usage(`unknown argument '${argv[i]}'`);
    if (i + 1 >= argv.length) usage(`${argv[i]} needs a value`);
    opts[key] = argv[++i];
  }
  if (!opts.etcd) usage("--etcd is required");
  if (!opts.tokens) usage("--tokens is required");
  if (!opts.rbac) usage("--rbac is required");
  if (!opts.models) usage("--models (or K8S_EMULATOR_MODELS) is required");
  opts.port = Number(opts.port);
  opts.etcdTimeoutMs = Number(opts.etcdTimeoutMs);
  if (!Number.isInteger(opts.port) || opts.port < 0 || opts.port > 65535) usage("bad --port");
  if (!(opts.etcdTimeoutMs > 0)) usage("bad --etcd-timeout-ms");
  if (!!opts.tlsCert !== !!opts.tlsKey) usage("--tls-cert and --tls-key go together");
  if (opts.clientCa && !opts.tlsCert) usage("--client-ca needs --tls-cert/--tls-key");
  opts.prefix = opts.prefix.replace(/\/+$/, "");
}
const etcdEndpoints = opts.etcd.split(",").map((e) => e.trim().replace(/\/+$/, "")).filter(Boolean);

// kubernetes-models, installed by tests/deploy/k8s/setup.sh into opts.models.
const modelsRequire = createRequire(path.join(path.resolve(opts.models), "package.json"));
let Lease, DeleteOptions;
try {
  ({ Lease } = modelsRequire("kubernetes-models/coordination.k8s.io/v1/Lease"));
  ({ DeleteOptions } = modelsRequire("@kubernetes-models/apimachinery/apis/meta/v1/DeleteOptions"));
} catch (e) {
  console.error(`k8s-emulator: kubernetes-models not found under ${opts.models} (run tests/deploy/k8s/setup.sh DIR): ${e.message}`);
  process.exit(1);
}
let validateModel; // from strict.mjs (ESM), loaded in main()

// ---------------------------------------------------------------------------------------------
// Kubernetes JSON
const LEASES = { group: "coordination.k8s.io", version: "v1", resource: "leases", kind: "Lease" };
const NODES = { group: "", version: "v1", resource: "nodes", kind: "Node" };
const qualified = (r) => (r.group ? `${r.resource}.${r.group}` : r.resource);

function status(code, reason, message, details) {
  const s = { kind: "Status", apiVersion: "v1", metadata: {}, status: "Failure", message, reason, code };
  if (details) s.details = details;
  return { code, body: s };
}
const det = (r, name) => (r.group ? { name, group: r.group, kind: r.resource } : { name, kind: r.resource });
const notFound = (r, name) => status(404, "NotFound", `${qualified(r)} "${name}" not found`, det(r, name));
const alreadyExists = (r, name) =>
  status(409, "AlreadyExists", `${qualified(r)} "${name}" already exists`, det(r, name));
const conflict = (r, name, why) =>
  status(409, "Conflict", `Operation cannot be fulfilled on ${qualified(r)} "${name}": ${why}`, det(r, name));
const modified = "the object has been modified; please apply your changes to the latest version and try again";
const badRequest = (message) => status(400, "BadRequest", message);
const internal = (message) =>
  status(500, "InternalError", `Internal error occurred: ${message}`, { causes: [{ message }] });
function invalid(r, name, problems) {
  const causes = problems.map((p) => ({
    reason: "FieldValueInvalid",
    message: `Invalid value: ${p.message}`,
    field: p.path.replace(/^\//, "").split("/").join("."),
  }));
  const list = causes.map((c) => `${c.field}: ${c.message}`).join(", ");
  return status(422, "Invalid", `${r.kind}.${r.group || "core"} "${name}" is invalid: ${list}`, {
    ...det(r, name),
    kind: r.kind,
    causes,
  });
}
const ok = (code, body) => ({ code, body });
const now = () => new Date().toISOString().replace(/\.\d+Z$/, "Z");

// ---------------------------------------------------------------------------------------------
// etcd v3 JSON gateway: base64 keys and values, int64 as strings, zero/false fields left out.
const b64 = (s) => Buffer.from(s, "utf8").toString("base64");
const unb64 = (s) => Buffer.from(s || "", "base64").toString("utf8");
function prefixEnd(key) {
  const b = Buffer.from(key, "utf8");
  b[b.length - 1]++;
  return b.toString("base64");
}
let etcdCurrent = 0;
class EtcdError extends Error {}
// One gateway call; on a connection error, a timeout or a 5xx it tries the next endpoint (each
// endpoint at most once per call).
async function etcd(api, body) {
  const errors = [];
  for (let i = 0; i < etcdEndpoints.length; i++) {
    const ep = etcdEndpoints[(etcdCurrent + i) % etcdEndpoints.length];
    try {
      const res = await fetch(`${ep}/v3/${api}`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify(body),
        signal: AbortSignal.timeout(opts.etcdTimeoutMs),
      });
      const text = await res.text();
      if (res.status >= 500) throw new Error(`HTTP ${res.status}: ${text.slice(0, 200)}`);
      const json = JSON.parse(text);
      if (res.status !== 200 || json.error) throw new EtcdError(`etcd ${api}: ${json.error || json.message || text}`);
      etcdCurrent = (etcdCurrent + i) % etcdEndpoints.length;
      return json;
    } catch (e) {
      if (e instanceof EtcdError) throw e;
      errors.push(`${ep}: ${e.name === "TimeoutError" ? "timeout" : e.cause?.code || e.cause?.message || e.message}`);
    }
  }
  throw new EtcdError(`etcd unavailable (${errors.join("; ")})`);
}
function decodeKv(kv) {
  const obj = JSON.parse(unb64(kv.value));
  obj.metadata.resourceVersion = String(kv.mod_revision);
  return obj;
}
async function etcdGet(key) {
  const r = await etcd("kv/range", { key: b64(key) });
  return r.kvs && r.kvs.length ? r.kvs[0] : undefined;
}
// Transaction: compare the key's target (CREATE or MOD) with a revision; on success run ops; on
// failure read the key. Returns {succeeded, revision, kv (the key after a failure)}.
async function etcdTxn(key, target, revision, success) {
  const cmp = { key: b64(key), target, result: "EQUAL" };
  cmp[target === "CREATE" ? "create_revision" : "mod_revision"] = String(revision);
  const r = await etcd("kv/txn", { compare: [cmp], success, failure: [{ request_range: { key: b64(key) } }] });
  const out = { succeeded: !!r.succeeded, revision: String(r.header.revision) };
  if (!out.succeeded) {
    const rr = r.responses?.[0]?.response_range;
    out.kv = rr?.kvs?.[0];
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// Authentication and authorization. Files are read on every request: tests may rewrite them.
// tokens: kube-apiserver's --token-auth-file format, "token,user,uid[,\"group1,group2\"]" lines.
// rbac: {"rules":[{"user":U,"namespace":NS|"*" (leases),"resource":"leases"|"nodes","verbs":[...]}]}
function authenticate(req) {
  const h = req.headers.authorization;
  if (h !== undefined) {
    const m = /^Bearer ([^\s]+)$/.exec(h);
    if (!m) return undefined;
    let lines;
    try {
      lines = fs.readFileSync(opts.tokens, "utf8").split("\n");
    } catch (e) {
      console.error(`k8s-emulator: cannot read ${opts.tokens}: ${e.message}`);
      return undefined;
    }
    for (const line of lines) {
      const f = line.trim().split(",");
      if (f.length >= 2 && f[0] === m[1]) return f[1];
    }
    return undefined;
  }
  const sock = req.socket;
  if (sock.authorized && sock.getPeerCertificate) {
    const cert = sock.getPeerCertificate();
    if (cert && cert.subject && cert.subject.CN) return cert.subject.CN;
  }
  return undefined;
}
function authorized(user, verb, resource, namespace) {
  let rules;
  try {
    rules = JSON.parse(fs.readFileSync(opts.rbac, "utf8")).rules || [];
  } catch (e) {
    console.error(`k8s-emulator: cannot read ${opts.rbac}: ${e.message}`);
    return false;
  }
  return rules.some(
    (r) =>
      r.user === user &&
      r.resource === resource &&
      (resource === "nodes" || r.namespace === "*" || r.namespace === namespace) &&
      Array.isArray(r.verbs) &&
      (r.verbs.includes(verb) || r.verbs.includes("*")),
  );
}
function forbidden(user, verb, r, name, namespace) {
  const where = namespace !== undefined ? ` in the namespace "${namespace}"` : " at the cluster scope";
  const what = name ? `${qualified(r)} "${name}"` : qualified(r);
  return status(
    403, "Forbidden",
    `${what} is forbidden: User "${user}" cannot ${verb} resource "${r.resource}" in API group "${r.group}"${where}`,
    det(r, name || ""),
  );
}

// ---------------------------------------------------------------------------------------------
// Validation: kubernetes-models' schema (types, formats, required), unknown fields (strict.mjs),
// and what kube-apiserver's own validation adds for these kinds.
const dnsSubdomain = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;
const qualifiedName = /^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$/;
const labelValue = /^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$/;
const microTime = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}(Z|[+-]\d\d:\d\d)$/;
const isObj = (v) => v !== null && typeof v === "object" && !Array.isArray(v);
function labelKeyProblem(key) {
  const slash = key.lastIndexOf("/");
  const prefix = slash >= 0 ? key.slice(0, slash) : undefined;
  const name = slash >= 0 ? key.slice(slash + 1) : key;
  if (prefix !== undefined && (prefix.length > 253 || !dnsSubdomain.test(prefix))) return "prefix is not a DNS-1123 subdomain";
  if (name.length > 63 || !qualifiedName.test(name)) return "name part must be a qualified name (at most 63 characters)";
  return undefined;
}
// Problems of a Lease body: [{path, message, unknown?}]. Missing apiVersion/kind are reported
// (kube-apiserver fills them from the URL, but a client is expected to send them) as `soft`.
function leaseProblems(body) {
  if (!isObj(body)) return [{ path: "", message: "the body is not a JSON object" }];
  const problems = [];
  if (body.apiVersion === undefined || body.kind === undefined) {
    problems.push({ path: "/apiVersion", message: "apiVersion and kind missing", soft: true });
  }
  for (const p of validateModel(Lease, body)) {
    if (p.path === "/apiVersion" || p.path === "/kind") continue; // checked by the caller (400)
    problems.push(p.message === "unknown field" ? { ...p, unknown: true } : p);
  }
  const md = body.metadata;
  if (isObj(md)) {
    if (typeof md.name === "string" && (md.name.length > 253 || !dnsSubdomain.test(md.name))) {
      problems.push({ path: "/metadata/name", message: `"${md.name}": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.'` });
    }
    if (isObj(md.labels)) {
      for (const [k, v] of Object.entries(md.labels)) {
        const why = labelKeyProblem(k);
        if (why) problems.push({ path: `/metadata/labels/${k.replace(/~/g, "~0").replace(/\//g, "~1")}`, message: `"${k}": ${why}` });
        if (typeof v === "string" && (v.length > 63 || !labelValue.test(v))) {
          problems.push({ path: `/metadata/labels/${k.replace(/~/g, "~0").replace(/\//g, "~1")}`, message: `"${v}": a valid label value must be 63 characters or less, alphanumeric at both ends` });
        }
      }
    }
  }
  const spec = body.spec;
  if (isObj(spec)) {
    if (Number.isInteger(spec.leaseDurationSeconds) && spec.leaseDurationSeconds <= 0) {
      problems.push({ path: "/spec/leaseDurationSeconds", message: `${spec.leaseDurationSeconds}: must be greater than 0` });
    }
    if (Number.isInteger(spec.leaseTransitions) && spec.leaseTransitions < 0) {
      problems.push({ path: "/spec/leaseTransitions", message: `${spec.leaseTransitions}: must be greater than or equal to 0` });
    }
    for (const f of ["acquireTime", "renewTime"]) {
      if (typeof spec[f] === "string" && !microTime.test(spec[f])) {
        problems.push({ path: `/spec/${f}`, message: `"${spec[f]}": a MicroTime must be RFC 3339 with exactly 6 fractional digits (2006-01-02T15:04:05.000000Z)` });
      }
    }
  }
  return problems;
}

// Validation log: every request body, valid or not, in memory and (JSON lines) in a file.
const vlog = { total: 0, invalid: 0, entries: [] };
function recordValidation(req, kind, problems, answered) {
  const entry = {
    time: new Date().toISOString(), method: req.method, path: req.url, kind,
    valid: problems.length === 0, problems, answered,
  };
  vlog.total++;
  if (!entry.valid) vlog.invalid++;
  vlog.entries.push(entry);
  if (vlog.entries.length > 10000) vlog.entries.shift();
  if (opts.validationLog) fs.appendFileSync(opts.validationLog, JSON.stringify(entry) + "\n");
}

// Removes the unknown fields (JSON pointers) from body, as kube-apiserver's decoder drops them.
function dropPaths(body, paths) {
  for (const p of paths) {
    const segs = p.split("/").slice(1).map((s) => s.replace(/~1/g, "/").replace(/~0/g, "~"));
    let o = body;
    for (let i = 0; i < segs.length - 1 && o; i++) o = o[segs[i]];
    if (o && typeof o === "object") delete o[segs[segs.length - 1]];
  }
}

// ---------------------------------------------------------------------------------------------
// Label selectors: equality-based only (k=v, k==v, k!=v, k, !k), comma-joined.
function parseSelector(s) {
  const terms = [];
  for (const raw of s.split(",")) {
    const t = raw.trim();
    if (!t) continue;
    let m;
    if ((m = /^([^=!\s]+)\s*(==|=|!=)\s*([^=!\s]*)$/.exec(t))) terms.push({ key: m[1], op: m[2] === "!=" ? "!=" : "=", value: m[3] });
    else if ((m = /^!([^=!\s]+)$/.exec(t))) terms.push({ key: m[1], op: "!" });
    else if ((m = /^([^=!\s()]+)$/.exec(t))) terms.push({ key: m[1], op: "exists" });
    else return undefined;
  }
  return terms;
}
function matches(terms, labels = {}) {
  return terms.every((t) => {
    const has = Object.prototype.hasOwnProperty.call(labels, t.key);
    if (t.op === "=") return has && labels[t.key] === t.value;
    if (t.op === "!=") return !has || labels[t.key] !== t.value;
    if (t.op === "!") return !has;
    return has;
  });
}

// ---------------------------------------------------------------------------------------------
// Leases
const leaseKey = (ns, name) => `${opts.prefix}/leases/${ns}/${name}`;
function withKind(obj) {
  return { apiVersion: "coordination.k8s.io/v1", kind: "Lease", ...obj };
}
// The object as stored: no resourceVersion (it is the key's mod_revision), no apiVersion/kind.
function stored(obj) {
  const o = JSON.parse(JSON.stringify(obj));
  delete o.apiVersion;
  delete o.kind;
  delete o.metadata.resourceVersion;
  return o;
}

// Parses, validates and normalizes a Lease body for ns/name (name undefined on create).
// Returns {obj} or {answer}.
function leaseBody(req, raw, ns, urlName, query) {
  let body;
  try {
    body = JSON.parse(raw);
  } catch (e) {
    recordValidation(req, "Lease", [{ path: "", message: `not JSON: ${e.message}` }], 400);
    return { answer: badRequest(`json: cannot unmarshal the request body: ${e.message}`) };
  }
  const name = isObj(body) && isObj(body.metadata) ? body.metadata.name : undefined;
  if (isObj(body) && ((body.apiVersion !== undefined && body.apiVersion !== "coordination.k8s.io/v1") || (body.kind !== undefined && body.kind !== "Lease"))) {
    recordValidation(req, "Lease", [{ path: "/kind", message: `${body.apiVersion}/${body.kind} is not coordination.k8s.io/v1 Lease` }], 400);
    return { answer: badRequest(`the API version in the data (${body.apiVersion}) does not match the expected API version (coordination.k8s.io/v1)`) };
  }
  const problems = leaseProblems(body);
  if (isObj(body) && isObj(body.metadata) && name === undefined) {
    problems.push({ path: "/metadata/name", message: "Required value: name or generateName is required" });
  }
  const hard = problems.filter((p) => !p.soft && !p.unknown);
  const unknown = problems.filter((p) => p.unknown);
  const strict = query.get("fieldValidation") === "Strict";
  let answered = 0;
  let answer;
  if (hard.length) {
    answer = invalid(LEASES, typeof name === "string" ? name : "", hard);
  } else if (unknown.length && strict) {
    answer = badRequest(`strict decoding error: ${unknown.map((p) => `unknown field "${p.path.slice(1).split("/").join(".")}"`).join(", ")}`);
  }
  if (answer) answered = answer.code;
  recordValidation(req, "Lease", problems, answered || "accepted");
  if (answer) return { answer };
  const md = body.metadata;
  if (md.namespace !== undefined && md.namespace !== ns) {
    return { answer: badRequest("the namespace of the provided object does not match the namespace sent on the request") };
  }
  if (urlName !== undefined && name !== urlName) {
    return { answer: badRequest(`the name of the object (${name}) does not match the name on the URL (${urlName})`) };
  }
  dropPaths(body, unknown.map((p) => p.path));
  const warnings = unknown.map((p) => `unknown field "${p.path.slice(1).split("/").join(".")}"`);
  return { obj: body, warnings };
}

async function createLease(req, raw, ns, query) {
  const parsed = leaseBody(req, raw, ns, undefined, query);
  if (parsed.answer) return parsed.answer;
  const obj = parsed.obj;
  if (obj.metadata.resourceVersion) return badRequest("resourceVersion should not be set on objects to be created");
  const md = obj.metadata;
  const out = {
    metadata: {
      name: md.name, namespace: ns, uid: crypto.randomUUID(), creationTimestamp: now(),
      ...(md.labels ? { labels: md.labels } : {}),
      ...(md.annotations ? { annotations: md.annotations } : {}),
      ...(md.ownerReferences ? { ownerReferences: md.ownerReferences } : {}),
    },
    spec: obj.spec || {},
  };
  const key = leaseKey(ns, md.name);
  const t = await etcdTxn(key, "CREATE", 0, [{ request_put: { key: b64(key), value: b64(JSON.stringify(out)) } }]);
  if (!t.succeeded) return alreadyExists(LEASES, md.name);
  out.metadata.resourceVersion = t.revision;
  return { code: 201, body: withKind(out), warnings: parsed.warnings };
}

async function getLease(ns, name) {
  const kv = await etcdGet(leaseKey(ns, name));
  if (!kv) return notFound(LEASES, name);
  return ok(200, withKind(decodeKv(kv)));
}

async function listLeases(ns, query) {
  let terms = [];
  if (query.has("labelSelector")) {
    terms = parseSelector(query.get("labelSelector"));
    if (!terms) return badRequest(`unable to parse requirement: only equality-based label selectors are emulated: "${query.get("labelSelector")}"`);
  }
  const p = `${opts.prefix}/leases/${ns}/`;
  const r = await etcd("kv/range", { key: b64(p), range_end: prefixEnd(p) });
  const items = (r.kvs || []).map(decodeKv).filter((o) => matches(terms, o.metadata.labels));
  return ok(200, {
    kind: "LeaseList", apiVersion: "coordination.k8s.io/v1",
    metadata: { resourceVersion: String(r.header.revision) }, items,
  });
}

async function updateLease(req, raw, ns, name, query) {
  const parsed = leaseBody(req, raw, ns, name, query);
  if (parsed.answer) return parsed.answer;
  const obj = parsed.obj;
  const wanted = obj.metadata.resourceVersion;
  if (wanted !== undefined && !/^[1-9][0-9]*$/.test(String(wanted))) {
    return invalid(LEASES, name, [{ path: "/metadata/resourceVersion", message: `"${wanted}": must be a resource version from this server` }]);
  }
  const key = leaseKey(ns, name);
  for (let attempt = 0; attempt < 20; attempt++) {
    const kv = await etcdGet(key);
    if (!kv) return notFound(LEASES, name);
    const cur = JSON.parse(unb64(kv.value));
    // uid and creationTimestamp are the server's; labels, annotations, ownerReferences and spec the client's.
    const md = obj.metadata;
    const out = {
      metadata: {
        name, namespace: ns, uid: cur.metadata.uid, creationTimestamp: cur.metadata.creationTimestamp,
        ...(md.labels ? { labels: md.labels } : {}),
        ...(md.annotations ? { annotations: md.annotations } : {}),
        ...(md.ownerReferences ? { ownerReferences: md.ownerReferences } : {}),
      },
      spec: obj.spec || {},
    };
    const expected = wanted !== undefined ? String(wanted) : String(kv.mod_revision);
    if (JSON.stringify(out) === JSON.stringify(cur) && expected === String(kv.mod_revision)) {
      // kube-apiserver skips a write that changes nothing: the resourceVersion stays.
      out.metadata.resourceVersion = String(kv.mod_revision);
      return { code: 200, body: withKind(out), warnings: parsed.warnings };
    }
    const t = await etcdTxn(key, "MOD", expected, [{ request_put: { key: b64(key), value: b64(JSON.stringify(out)) } }]);
    if (t.succeeded) {
      out.metadata.resourceVersion = t.revision;
      return { code: 200, body: withKind(out), warnings: parsed.warnings };
    }
    if (!t.kv) return notFound(LEASES, name);
    if (wanted !== undefined) return conflict(LEASES, name, modified);
    // Unconditional update raced another writer: read again and retry, as kube-apiserver does.
  }
  return conflict(LEASES, name, modified);
}

async function deleteLease(req, raw, ns, name) {
  let pre = {};
  if (raw.length) {
    let body;
    try {
      body = JSON.parse(raw);
    } catch (e) {
      recordValidation(req, "DeleteOptions", [{ path: "", message: `not JSON: ${e.message}` }], 400);
      return badRequest(`json: cannot unmarshal the request body: ${e.message}`);
    }
    const problems = isObj(body) ? validateModel(DeleteOptions, body).filter((p) => p.path !== "/apiVersion" && p.path !== "/kind") : [{ path: "", message: "not a JSON object" }];
    if (isObj(body) && (body.kind !== undefined || body.apiVersion !== undefined) &&
        (body.kind !== "DeleteOptions" || !["v1", "meta.k8s.io/v1"].includes(body.apiVersion))) {
      problems.push({ path: "/kind", message: `${body.apiVersion}/${body.kind} is not v1 DeleteOptions` });
    }
    const hard = problems.filter((p) => p.message !== "unknown field");
    recordValidation(req, "DeleteOptions", problems, hard.length ? 400 : "accepted");
    if (hard.length) return badRequest(`invalid DeleteOptions: ${hard.map((p) => `${p.path}: ${p.message}`).join("; ")}`);
    pre = body.preconditions || {};
  }
  const key = leaseKey(ns, name);
  for (let attempt = 0; attempt < 20; attempt++) {
    const kv = await etcdGet(key);
    if (!kv) return notFound(LEASES, name);
    const cur = decodeKv(kv);
    if (pre.uid !== undefined && pre.uid !== null && pre.uid !== cur.metadata.uid) {
      return conflict(LEASES, name, `Precondition failed: UID in precondition: ${pre.uid}, UID in object meta: ${cur.metadata.uid}`);
    }
    const hasRv = pre.resourceVersion !== undefined && pre.resourceVersion !== null;
    if (hasRv && String(pre.resourceVersion) !== cur.metadata.resourceVersion) {
      return conflict(LEASES, name, `Precondition failed: ResourceVersion in precondition: ${pre.resourceVersion}, ResourceVersion in object meta: ${cur.metadata.resourceVersion}`);
    }
    // Delete only the version the preconditions were checked against.
    const t = await etcdTxn(key, "MOD", kv.mod_revision, [{ request_delete_range: { key: b64(key) } }]);
    if (t.succeeded) return ok(200, withKind(cur));
    if (!t.kv) return notFound(LEASES, name);
    // Modified in between: check the preconditions again against the new version.
  }
  return conflict(LEASES, name, modified);
}

// ---------------------------------------------------------------------------------------------
// Nodes: clients may only get/list them; tests create and delete them on the admin path.
const nodeKey = (name) => `${opts.prefix}/minions/${name}`;
async function getNode(name) {
  const kv = await etcdGet(nodeKey(name));
  if (!kv) return notFound(NODES, name);
  return ok(200, { apiVersion: "v1", kind: "Node", ...decodeKv(kv) });
}
async function listNodes() {
  const p = `${opts.prefix}/minions/`;
  const r = await etcd("kv/range", { key: b64(p), range_end: prefixEnd(p) });
  return ok(200, { kind: "NodeList", apiVersion: "v1", metadata: { resourceVersion: String(r.header.revision) }, items: (r.kvs || []).map(decodeKv) });
}
async function adminCreateNode(raw) {
  let body;
  try {
    body = JSON.parse(raw);
  } catch (e) {
    return badRequest(`not JSON: ${e.message}`);
  }
  const name = body.name || body.metadata?.name;
  if (typeof name !== "string" || !dnsSubdomain.test(name)) return badRequest("a node needs a name (a DNS-1123 subdomain)");
  const obj = {
    metadata: { name, uid: crypto.randomUUID(), creationTimestamp: now(), labels: body.labels || body.metadata?.labels || { "kubernetes.io/hostname": name } },
    spec: {},
    status: { conditions: [{ type: "Ready", status: "True", reason: "KubeletReady", message: "emulated", lastHeartbeatTime: now(), lastTransitionTime: now() }] },
  };
  const key = nodeKey(name);
  const t = await etcdTxn(key, "CREATE", 0, [{ request_put: { key: b64(key), value: b64(JSON.stringify(obj)) } }]);
  if (!t.succeeded) return alreadyExists(NODES, name);
  obj.metadata.resourceVersion = t.revision;
  return ok(201, { apiVersion: "v1", kind: "Node", ...obj });
}
async function adminDeleteNode(name) {
  const r = await etcd("kv/deleterange", { key: b64(nodeKey(name)) });
  if (!r.deleted || r.deleted === "0") return notFound(NODES, name);
  return ok(200, { kind: "Status", apiVersion: "v1", metadata: {}, status: "Success", details: det(NODES, name) });
}

// ---------------------------------------------------------------------------------------------
// Faults (admin path): applied to API requests (not /_emulator/ nor /healthz), `count` times
// (unlimited when absent), to the methods listed (all when absent).
//   {"status": 500}          answer that status with a Status body instead of doing the request
//   {"garbage": true}        answer 200 with a body that is not JSON
//   {"drop": true}           close the connection without an answer
//   {"delayMs": N}           wait N ms first (alone: then serve normally)
//   {"after": true}          do the request against etcd first, then answer the fault (a lost answer)
let fault = null;
function takeFault(req) {
  if (!fault) return null;
  if (fault.methods && !fault.methods.includes(req.method)) return null;
  if (fault.pathContains && !req.url.includes(fault.pathContains)) return null;
  const f = fault;
  if (f.count !== undefined && --f.count <= 0) fault = null;
  f.applied = (f.applied || 0) + 1;
  return f;
}

// Request counts per (verb, resource), for the benchmarks' "backend calls per ADD".
const stats = {};
function count(verb, resource, code) {
  const k = `${verb} ${resource}`;
  stats[k] = stats[k] || { total: 0, byCode: {} };
  stats[k].total++;
  stats[k].byCode[code] = (stats[k].byCode[code] || 0) + 1;
}

async function admin(req, raw, parts) {
  const what = parts[0];
  if (what === "faults") {
    if (req.method === "GET") return ok(200, { fault });
    if (req.method === "DELETE") { fault = null; return ok(200, { fault }); }
    if (req.method === "POST") {
      let f;
      try { f = JSON.parse(raw || "{}"); } catch (e) { return badRequest(`not JSON: ${e.message}`); }
      if (!isObj(f)) return badRequest("a fault is a JSON object");
      fault = Object.keys(f).length ? f : null;
      return ok(200, { fault });
    }
  } else if (what === "nodes") {
    if (req.method === "POST" && parts.length === 1) return adminCreateNode(raw);
    if (req.method === "DELETE" && parts.length === 2) return adminDeleteNode(parts[1]);
  } else if (what === "validation") {
    if (req.method === "GET") return ok(200, vlog);
    if (req.method === "DELETE") { vlog.total = 0; vlog.invalid = 0; vlog.entries = []; return ok(200, vlog); }
  } else if (what === "stats") {
    if (req.method === "GET") return ok(200, stats);
    if (req.method === "DELETE") { for (const k of Object.keys(stats)) delete stats[k]; return ok(200, stats); }
  }
  return status(404, "NotFound", "the server could not find the requested resource");
}

// ---------------------------------------------------------------------------------------------
// Routing
const leasesRe = /^\/apis\/coordination\.k8s\.io\/v1\/namespaces\/([^/]+)\/leases(?:\/([^/]+))?$/;
const nodesRe = /^\/api\/v1\/nodes(?:\/([^/]+))?$/;
async function api(req, raw, url) {
  const p = url.pathname;
  let m, r, ns, name;
  if ((m = leasesRe.exec(p))) { r = LEASES; ns = decodeURIComponent(m[1]); name = m[2] && decodeURIComponent(m[2]); }
  else if ((m = nodesRe.exec(p))) { r = NODES; name = m[1] && decodeURIComponent(m[1]); }
  else return { verb: "-", resource: "-", answer: status(404, "NotFound", "the server could not find the requested resource") };
  const verb = { GET: name ? "get" : "list", POST: "create", PUT: "update", DELETE: "delete" }[req.method];
  const allowed = r === LEASES ? (name ? ["get", "update", "delete"] : ["list", "create"]) : ["get", "list"];
  if (!verb || !allowed.includes(verb)) {
    return { verb: req.method, resource: r.resource, answer: status(405, "MethodNotAllowed", `the server does not allow this method on the requested resource`) };
  }
  const user = authenticate(req);
  if (user === undefined) return { verb, resource: r.resource, answer: status(401, "Unauthorized", "Unauthorized") };
  if (!authorized(user, verb, r.resource, ns)) return { verb, resource: r.resource, answer: forbidden(user, verb, r, name, ns) };
  const q = url.searchParams;
  let answer;
  if (r === LEASES) {
    if (verb === "create") answer = await createLease(req, raw, ns, q);
    else if (verb === "list") answer = await listLeases(ns, q);
    else if (verb === "get") answer = await getLease(ns, name);
    else if (verb === "update") answer = await updateLease(req, raw, ns, name, q);
    else answer = await deleteLease(req, raw, ns, name);
  } else {
    answer = verb === "get" ? await getNode(name) : await listNodes();
  }
  return { verb, resource: r.resource, answer };
}

function send(res, answer) {
  const headers = { "content-type": "application/json", "cache-control": "no-cache, private" };
  if (answer.warnings && answer.warnings.length) headers.warning = answer.warnings.map((w) => `299 - "${w.replace(/"/g, "'")}"`).join(", ");
  const text = JSON.stringify(answer.body) + "\n";
  res.writeHead(answer.code, headers);
  res.end(text);
}

async function handle(req, res, raw) {
  const url = new URL(req.url, "http://emulator");
  if (url.pathname.startsWith("/_emulator/")) {
    return send(res, await admin(req, raw, url.pathname.slice("/_emulator/".length).split("/").filter(Boolean).map(decodeURIComponent)));
  }
  if (url.pathname === "/healthz" || url.pathname === "/readyz" || url.pathname === "/livez") {
    res.writeHead(200, { "content-type": "text/plain" });
    return res.end("ok");
  }
  const f = takeFault(req);
  if (f && f.delayMs) await new Promise((r) => setTimeout(r, Number(f.delayMs)));
  const faulty = f && (f.status || f.garbage || f.drop);
  if (faulty && !f.after) return answerFault(res, f);
  let out;
  try {
    out = await api(req, raw, url);
  } catch (e) {
    out = { verb: req.method, resource: "?", answer: internal(e.message) };
  }
  count(out.verb, out.resource, out.answer.code);
  if (faulty) return answerFault(res, f);
  send(res, out.answer);
}
function answerFault(res, f) {
  if (f.drop) return res.socket.destroy();
  if (f.garbage) {
    res.writeHead(200, { "content-type": "application/json" });
    return res.end('{"kind":"Lease","apiVersion":"coordination.k8s.io/v1","metadata":{"name":\u0000 garbage <html>');
  }
  const code = Number(f.status);
  send(res, status(code, code === 503 ? "ServiceUnavailable" : code === 504 ? "Timeout" : "InternalError", f.message || "injected fault"));
}

async function main() {
  ({ validateModel } = await import(pathToFileURL(path.join(path.resolve(opts.models), "strict.mjs")).href));
  const onRequest = (req, res) => {
    const chunks = [];
    req.on("data", (c) => chunks.push(c));
    req.on("end", () => {
      handle(req, res, Buffer.concat(chunks).toString("utf8")).catch((e) => {
        console.error(`k8s-emulator: ${e.stack}`);
        if (!res.headersSent) send(res, internal(e.message));
      });
    });
  };
  let server;
  if (opts.tlsCert) {
    const tls = { cert: fs.readFileSync(opts.tlsCert), key: fs.readFileSync(opts.tlsKey) };
    if (opts.clientCa) Object.assign(tls, { ca: fs.readFileSync(opts.clientCa), requestCert: true, rejectUnauthorized: false });
    server = https.createServer(tls, onRequest);
  } else {
    server = http.createServer(onRequest);
  }
  server.keepAliveTimeout = 30000;
  server.listen(opts.port, opts.host, () => {
    process.stdout.write(`${server.address().port}\n`);
  });
  server.on("error", (e) => {
    console.error(`k8s-emulator: ${e.message}`);
    process.exit(1);
  });
  const stop = () => { server.close(); process.exit(0); };
  process.on("SIGTERM", stop);
  process.on("SIGINT", stop);
}
main().catch((e) => {
  console.error(`k8s-emulator: ${e.stack}`);
  process.exit(1);
});
