#!/usr/bin/env node
// SPDX-License-Identifier: Apache-2.0
// A Kubernetes API emulator for the tests of ibcni-ipam's kubernetes backend: coordination.k8s.io/v1
// Leases in namespaces, v1 Namespaces and Nodes (read-only to clients), bearer-token and
// client-certificate authentication with a small RBAC table, every object stored in a real etcd
// through its v3 JSON gateway (resourceVersion = the key's mod_revision, as kube-apiserver does),
// every request body validated against the Kubernetes OpenAPI schemas of kubernetes-models and the
// rules kube-apiserver adds. Which rule comes from where in kube-apiserver: README.md.
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
let Lease, DeleteOptions, YAML;
try {
  ({ Lease } = modelsRequire("kubernetes-models/coordination.k8s.io/v1/Lease"));
  ({ DeleteOptions } = modelsRequire("@kubernetes-models/apimachinery/apis/meta/v1/DeleteOptions"));
} catch (e) {
  console.error(`k8s-emulator: kubernetes-models not found under ${opts.models} (run tests/deploy/k8s/setup.sh DIR): ${e.message}`);
  process.exit(1);
}
try {
  YAML = modelsRequire("yaml"); // same lock file; only for application/yaml bodies and answers
} catch {
  YAML = null;
}
let validateModel; // from strict.mjs (ESM), loaded in main()

// The version /version reports: the kube-apiserver whose rules are emulated (README.md).
const SERVER_VERSION = { major: "1", minor: "34", gitVersion: "v1.34.0+k8s-emulator" };

// ---------------------------------------------------------------------------------------------
// Resources
const LEASES = {
  group: "coordination.k8s.io", version: "v1", resource: "leases", singular: "lease", kind: "Lease",
  namespaced: true, key: "leases", verbs: ["create", "delete", "get", "list", "patch", "update"],
};
const NODES = {
  group: "", version: "v1", resource: "nodes", singular: "node", kind: "Node", namespaced: false,
  key: "minions", verbs: ["get", "list"], shortNames: ["no"],
};
const NAMESPACES = {
  group: "", version: "v1", resource: "namespaces", singular: "namespace", kind: "Namespace",
  namespaced: false, key: "namespaces", verbs: ["get", "list"], shortNames: ["ns"],
};
const qualified = (r) => (r.group ? `${r.resource}.${r.group}` : r.resource);
const groupVersion = (r) => (r.group ? `${r.group}/${r.version}` : r.version);
const objKey = (r, ns, name) => (r.namespaced ? `${opts.prefix}/${r.key}/${ns}/${name}` : `${opts.prefix}/${r.key}/${name}`);
const listPrefix = (r, ns) => (r.namespaced && ns !== undefined ? `${opts.prefix}/${r.key}/${ns}/` : `${opts.prefix}/${r.key}/`);
// The namespaces kube-apiserver creates (default, kube-system, kube-public: the system namespaces
// controller; kube-node-lease: the kubelet's node lease namespace) and NamespaceLifecycle's
// namespaces that may not be deleted.
const DEFAULT_NAMESPACES = ["default", "kube-system", "kube-public", "kube-node-lease"];
const IMMORTAL_NAMESPACES = new Set(["default", "kube-system", "kube-public"]);

// ---------------------------------------------------------------------------------------------
// Go-like formatting of values in messages (fmt's %q, %v, %#v).
const goQuote = (s) => JSON.stringify(String(s)).replace(/\\u00([0-9a-f]{2})/gi, "\\x$1");
const goStringSlice = (a) => `[]string{${a.map(goQuote).join(", ")}}`;
// A value preformatted as Go prints it (e.g. 0x0 for a uint64, a time.Time's String()).
const goRaw = (text) => ({ goRaw: text });
function goValue(v) {
  if (v === null || v === undefined) return "null";
  if (typeof v === "object" && v.goRaw !== undefined) return v.goRaw;
  if (typeof v === "string") return goQuote(v);
  if (typeof v === "number" || typeof v === "boolean") return String(v);
  if (Array.isArray(v) && v.every((x) => typeof x === "string")) return goStringSlice(v);
  return JSON.stringify(v);
}
// time.Time's String() for an RFC 3339 timestamp in UTC: "2006-01-02 15:04:05 +0000 UTC".
const goTime = (ts) => goRaw(String(ts).replace("T", " ").replace(/(\.\d+)?Z$/, (m, f) => `${f || ""} +0000 UTC`));

// ---------------------------------------------------------------------------------------------
// Field errors (k8s.io/apimachinery/pkg/util/validation/field) and Status objects
// (k8s.io/apimachinery/pkg/api/errors). A field error: {type, field, value, detail, ptr}; ptr is
// the JSON pointer of the offending value, for the validation log.
const FIELD_TYPES = {
  FieldValueInvalid: "Invalid value", FieldValueRequired: "Required value", FieldValueForbidden: "Forbidden",
  FieldValueNotSupported: "Unsupported value", FieldValueTooLong: "Too long", FieldValueDuplicate: "Duplicate value",
};
const withValue = new Set(["FieldValueInvalid", "FieldValueNotSupported", "FieldValueDuplicate"]);
function errorBody(e) {
  let s = FIELD_TYPES[e.type];
  if (withValue.has(e.type)) s += `: ${goValue(e.value)}`;
  if (e.detail) s += `: ${e.detail}`;
  return s;
}
const fieldErrorText = (e) => `${e.field}: ${errorBody(e)}`;
const ptrOf = (field) => "/" + field.replace(/\[(\d+)\]/g, ".$1").split(".").join("/");
const invalidField = (field, value, detail, ptr) => ({ type: "FieldValueInvalid", field, value, detail, ptr: ptr || ptrOf(field) });
const requiredField = (field, detail, ptr) => ({ type: "FieldValueRequired", field, detail, ptr: ptr || ptrOf(field) });
const forbiddenField = (field, detail, ptr) => ({ type: "FieldValueForbidden", field, detail, ptr: ptr || ptrOf(field) });
const notSupportedField = (field, value, supported, ptr) => ({
  type: "FieldValueNotSupported", field, value,
  detail: `supported values: ${supported.map((s) => goQuote(s)).join(", ")}`, ptr: ptr || ptrOf(field),
});
const tooLongField = (field, max, ptr) => ({ type: "FieldValueTooLong", field, detail: `must have at most ${max} bytes`, ptr: ptr || ptrOf(field) });
// field.ErrorList.ToAggregate().Error(): one message as is, several in brackets; duplicates once.
function aggregateText(errs) {
  const msgs = [...new Set(errs.map(fieldErrorText))];
  return msgs.length === 1 ? msgs[0] : `[${msgs.join(", ")}]`;
}

function statusOf(code, reason, message, details) {
  const s = { kind: "Status", apiVersion: "v1", metadata: {}, status: "Failure", message };
  if (reason) s.reason = reason;
  if (details) {
    const d = {};
    for (const k of ["name", "group", "kind", "uid", "causes", "retryAfterSeconds"]) {
      if (details[k] !== undefined && details[k] !== "" && !(Array.isArray(details[k]) && !details[k].length)) d[k] = details[k];
    }
    s.details = d;
  }
  s.code = code;
  return { code, body: s };
}
const det = (r, name) => ({ name, group: r.group, kind: r.resource });
const notFound = (r, name) => statusOf(404, "NotFound", `${qualified(r)} "${name}" not found`, det(r, name));
const alreadyExists = (r, name, prefix = "") =>
  statusOf(409, "AlreadyExists", `${prefix}${qualified(r)} "${name}" already exists`, det(r, name));
// errors.NewConflict(GroupResource, name, err).
const conflictOn = (group, resource, name, why) =>
  statusOf(409, "Conflict", `Operation cannot be fulfilled on ${group ? `${resource}.${group}` : resource} "${name}": ${why}`,
    { name, group, kind: resource });
const conflict = (r, name, why) => conflictOn(r.group, r.resource, name, why);
const MODIFIED = "the object has been modified; please apply your changes to the latest version and try again";
const badRequest = (message) => statusOf(400, "BadRequest", message);
const internal = (message) => statusOf(500, "InternalError", `Internal error occurred: ${message}`, { causes: [{ message }] });
const routeNotFound = () => ({ code: 404, body: { kind: "Status", apiVersion: "v1", metadata: {}, status: "Failure", message: "the server could not find the requested resource", reason: "NotFound", details: {}, code: 404 } });
const methodNotAllowed = () => statusOf(405, "MethodNotAllowed", "the server does not allow this method on the requested resource", {});
// errors.NewInvalid(GroupKind, name, errs): kind + "." + group in the message, causes from errs.
function invalidStatus(group, kind, name, errs) {
  const gk = group ? `${kind}.${group}` : kind;
  return statusOf(422, "Invalid", `${gk} "${name}" is invalid: ${aggregateText(errs)}`, {
    name, group, kind,
    causes: errs.map((e) => ({ reason: e.type, message: errorBody(e), field: e.field })),
  });
}
// errors.NewForbidden(GroupResource, name, err).
function forbiddenStatus(r, name, why, causes) {
  const q = qualified(r);
  const message = name ? `${q} "${name}" is forbidden: ${why}` : `${q} is forbidden: ${why}`;
  return statusOf(403, "Forbidden", message, { ...det(r, name), causes });
}
const ok = (code, body) => ({ code, body });
const now = () => new Date().toISOString().replace(/\.\d+Z$/, "Z");
const isObj = (v) => v !== null && typeof v === "object" && !Array.isArray(v);
const clone = (v) => (v === undefined ? undefined : JSON.parse(JSON.stringify(v)));

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
const putOp = (key, obj) => ({ request_put: { key: b64(key), value: b64(JSON.stringify(obj)) } });
const deleteOp = (key) => ({ request_delete_range: { key: b64(key) } });

// ---------------------------------------------------------------------------------------------
// Authentication and authorization. Files are read on every request: tests may rewrite them.
// tokens: kube-apiserver's --token-auth-file format, "token,user,uid[,\"group1,group2\"]" lines.
// rbac: {"rules":[{"user":U,"namespace":NS|"*" (leases),"resource":"leases"|"nodes"|"namespaces","verbs":[...]}]}
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
// namespace: the request's (undefined for a cluster-scoped resource or a list across namespaces,
// which only a rule for namespace "*" allows).
function authorized(user, verb, r, namespace) {
  let rules;
  try {
    rules = JSON.parse(fs.readFileSync(opts.rbac, "utf8")).rules || [];
  } catch (e) {
    console.error(`k8s-emulator: cannot read ${opts.rbac}: ${e.message}`);
    return false;
  }
  return rules.some(
    (rule) =>
      rule.user === user &&
      rule.resource === r.resource &&
      (!r.namespaced || rule.namespace === "*" || (namespace !== undefined && rule.namespace === namespace)) &&
      Array.isArray(rule.verbs) &&
      (rule.verbs.includes(verb) || rule.verbs.includes("*")),
  );
}
// The authorization filter's 403 (endpoints/handlers/responsewriters.forbiddenMessage).
function forbidden(user, verb, r, name, namespace) {
  const where = r.namespaced && namespace !== undefined ? ` in the namespace "${namespace}"` : " at the cluster scope";
  return forbiddenStatus(r, name, `User "${user}" cannot ${verb} resource "${r.resource}" in API group "${r.group}"${where}`);
}

// ---------------------------------------------------------------------------------------------
// Name and label formats (k8s.io/apimachinery/pkg/util/validation), with their messages.
const dns1123LabelFmt = "[a-z0-9]([-a-z0-9]*[a-z0-9])?";
const dns1123SubdomainFmt = `${dns1123LabelFmt}(\\.${dns1123LabelFmt})*`;
const qualifiedNameFmt = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]";
const labelValueFmt = `(${qualifiedNameFmt})?`;
const reOf = (f) => new RegExp(`^${f}$`);
function regexError(msg, fmt, ...examples) {
  if (!examples.length) return `${msg} (regex used for validation is '${fmt}')`;
  return `${msg} (e.g. ${examples.map((e) => `'${e}', `).join(" or ")}regex used for validation is '${fmt}')`;
}
const maxLenError = (n) => `must be no more than ${n} characters`;
function isDNS1123Subdomain(v) {
  const errs = [];
  if (v.length > 253) errs.push(maxLenError(253));
  if (!reOf(dns1123SubdomainFmt).test(v)) {
    errs.push(regexError("a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character", dns1123SubdomainFmt, "example.com"));
  }
  return errs;
}
function isDNS1123Label(v) {
  const errs = [];
  if (v.length > 63) errs.push(maxLenError(63));
  if (!reOf(dns1123LabelFmt).test(v)) {
    errs.push(regexError("a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character", dns1123LabelFmt, "my-name", "123-abc"));
  }
  return errs;
}
const qualifiedNameMsg = "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";
function isQualifiedName(v) {
  const errs = [];
  const parts = v.split("/");
  let name;
  if (parts.length === 1) {
    name = parts[0];
  } else if (parts.length === 2) {
    const prefix = parts[0];
    name = parts[1];
    if (!prefix.length) errs.push("prefix part must be non-empty");
    else errs.push(...isDNS1123Subdomain(prefix).map((m) => `prefix part ${m}`));
  } else {
    return [`a qualified name ${regexError(qualifiedNameMsg, qualifiedNameFmt, "MyName", "my.name", "123-abc")} with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')`];
  }
  if (!name.length) errs.push("name part must be non-empty");
  else if (name.length > 63) errs.push(`name part ${maxLenError(63)}`);
  if (!reOf(qualifiedNameFmt).test(name)) errs.push(`name part ${regexError(qualifiedNameMsg, qualifiedNameFmt, "MyName", "my.name", "123-abc")}`);
  return errs;
}
function isValidLabelValue(v) {
  const errs = [];
  if (v.length > 63) errs.push(maxLenError(63));
  if (!reOf(labelValueFmt).test(v)) {
    errs.push(regexError("a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character", labelValueFmt, "MyValue", "my_value", "12345"));
  }
  return errs;
}
const ptrSeg = (k) => String(k).replace(/~/g, "~0").replace(/\//g, "~1");

// ---------------------------------------------------------------------------------------------
// Go's time.Parse, for the two layouts the decoder uses: metav1.Time (time.RFC3339) and
// metav1.MicroTime (RFC3339Micro: exactly six fractional digits). Returns the error text or "".
function goTimeParseError(value, micro) {
  const layout = micro ? "2006-01-02T15:04:05.000000Z07:00" : "2006-01-02T15:04:05Z07:00";
  const fail = (rest, elem) => `parsing time ${goQuote(value)} as ${goQuote(layout)}: cannot parse ${goQuote(rest)} as ${goQuote(elem)}`;
  const range = (what) => `parsing time ${goQuote(value)}: ${what} out of range`;
  let v = value;
  const num = (elem, n) => {
    if (v.length < n || !/^\d+$/.test(v.slice(0, n))) return undefined;
    const x = Number(v.slice(0, n));
    v = v.slice(n);
    return x;
  };
  const lit = (s) => {
    if (!v.startsWith(s)) return false;
    v = v.slice(s.length);
    return true;
  };
  let rest = v;
  const year = num("2006", 4);
  if (year === undefined) return fail(rest, "2006");
  rest = v;
  if (!lit("-")) return fail(rest, "-");
  rest = v;
  const month = num("01", 2);
  if (month === undefined) return fail(rest, "01");
  if (month < 1 || month > 12) return range("month");
  rest = v;
  if (!lit("-")) return fail(rest, "-");
  rest = v;
  const day = num("02", 2);
  if (day === undefined) return fail(rest, "02");
  rest = v;
  if (!lit("T")) return fail(rest, "T");
  rest = v;
  const hour = num("15", 2);
  if (hour === undefined) return fail(rest, "15");
  if (hour > 23) return range("hour");
  rest = v;
  if (!lit(":")) return fail(rest, ":");
  rest = v;
  const minute = num("04", 2);
  if (minute === undefined) return fail(rest, "04");
  if (minute > 59) return range("minute");
  rest = v;
  if (!lit(":")) return fail(rest, ":");
  rest = v;
  const second = num("05", 2);
  if (second === undefined) return fail(rest, "05");
  if (second > 59) return range("second");
  if (micro) {
    rest = v;
    if (v.length < 7 || !/^[.,]\d{6}$/.test(v.slice(0, 7))) return fail(rest, ".000000");
    v = v.slice(7);
  } else if (/^[.,]\d/.test(v)) {
    v = v.replace(/^[.,]\d+/, ""); // a fractional second after the seconds is accepted
  }
  rest = v;
  if (!lit("Z")) {
    if (v.length < 6 || v[3] !== ":" || !/^[+-]\d\d:\d\d/.test(v)) return fail(rest, "Z07:00");
    v = v.slice(6);
  }
  if (v.length) return `parsing time ${goQuote(value)}: extra text: ${goQuote(v)}`;
  const days = new Date(Date.UTC(year, month, 0)).getUTCDate();
  if (day < 1 || day > days) return range("day");
  return "";
}

// ---------------------------------------------------------------------------------------------
// Decoding a request body as kube-apiserver's decoder does (endpoints/handlers/rest.go
// transformDecodeError): a JSON type error or an unparsable time is 400 "Lease in version "v1"
// cannot be handled as a Lease: ..."; unknown fields are dropped with a warning (fieldValidation
// Warn, the default), refused under Strict, ignored under Ignore.
const GO_TYPES = {
  "/spec/holderIdentity": ["LeaseSpec", "string"], "/spec/leaseDurationSeconds": ["LeaseSpec", "int32"],
  "/spec/leaseTransitions": ["LeaseSpec", "int32"], "/spec/strategy": ["LeaseSpec", "string"],
  "/spec/preferredHolder": ["LeaseSpec", "string"], "/metadata/name": ["ObjectMeta", "string"],
  "/metadata/generateName": ["ObjectMeta", "string"], "/metadata/namespace": ["ObjectMeta", "string"],
  "/metadata/uid": ["ObjectMeta", "types.UID"], "/metadata/resourceVersion": ["ObjectMeta", "string"],
  "/metadata/generation": ["ObjectMeta", "int64"], "/metadata/deletionGracePeriodSeconds": ["ObjectMeta", "int64"],
  "/metadata/labels": ["ObjectMeta", "map[string]string"], "/metadata/annotations": ["ObjectMeta", "map[string]string"],
  "/metadata/finalizers": ["ObjectMeta", "[]string"], "/metadata/ownerReferences": ["ObjectMeta", "[]v1.OwnerReference"],
  "/metadata": ["Lease", "v1.ObjectMeta"], "/spec": ["Lease", "v1.LeaseSpec"],
};
const TIME_FIELDS = { "/spec/acquireTime": true, "/spec/renewTime": true, "/metadata/creationTimestamp": false, "/metadata/deletionTimestamp": false };
function valueAt(body, ptr) {
  let o = body;
  for (const s of ptr.split("/").slice(1).map((x) => x.replace(/~1/g, "/").replace(/~0/g, "~"))) {
    if (o === null || typeof o !== "object") return undefined;
    o = o[s];
  }
  return o;
}
const jsonTypeName = (v) => (typeof v === "string" ? "string" : typeof v === "number" ? "number" : typeof v === "boolean" ? "bool" : Array.isArray(v) ? "array" : "object");
// The decoder's message for a value that does not decode (ptr: its JSON pointer).
function decodeErrorText(body, ptr) {
  const v = valueAt(body, ptr);
  if (ptr in TIME_FIELDS) {
    if (typeof v !== "string") return `json: cannot unmarshal ${jsonTypeName(v)} into Go value of type string`;
    return goTimeParseError(v, TIME_FIELDS[ptr]) || undefined;
  }
  let key = ptr;
  let elem = false;
  if (!GO_TYPES[key]) {
    key = ptr.replace(/\/[^/]*$/, "");
    elem = true;
  }
  const [struct, type] = GO_TYPES[key] || [key.split("/")[1] === "spec" ? "LeaseSpec" : "ObjectMeta", "string"];
  const goType = elem ? type.replace(/^\[\][^ ]*$/, type.slice(2)).replace(/^map\[string\]/, "") : type;
  const field = key.slice(1).split("/").join(".");
  const what = typeof v === "number" && /int/.test(goType) ? `number ${v}` : jsonTypeName(v);
  return `json: cannot unmarshal ${what} into Go struct field ${struct}.${field} of type ${goType}`;
}
// Document order of the JSON pointers of a value, to report the first decode error as Go does.
function documentOrder(value) {
  const order = new Map();
  const walk = (v, p) => {
    order.set(p, order.size);
    if (v && typeof v === "object") for (const k of Object.keys(v)) walk(v[k], `${p}/${ptrSeg(k)}`);
  };
  walk(value, "");
  return (p) => (order.has(p) ? order.get(p) : Infinity);
}
const isDecodeProblem = (m) => /^must be (integer|string|number|boolean|object|array)/.test(m) || /^must match format/.test(m);

// Removes the unknown fields (JSON pointers) from body, as kube-apiserver's decoder drops them.
function dropPaths(body, paths) {
  for (const p of paths) {
    const segs = p.split("/").slice(1).map((s) => s.replace(/~1/g, "/").replace(/~0/g, "~"));
    let o = body;
    for (let i = 0; i < segs.length - 1 && o; i++) o = o[segs[i]];
    if (o && typeof o === "object") delete o[segs[segs.length - 1]];
  }
}

// Reads a request body (JSON, or YAML when the yaml package is there) after the Content-Type
// check kube-apiserver's NegotiateInputSerializer makes. Returns {value} or {answer}.
const INPUT_TYPES = ["application/json", "application/yaml"];
function readBody(req, raw, what) {
  // No Content-Type: the first supported media type, JSON (negotiation.NegotiateInputSerializerForMediaType).
  const ct = String(req.headers["content-type"] || "application/json").split(";")[0].trim().toLowerCase();
  const yaml = ct === "application/yaml" && YAML;
  if (ct !== "application/json" && !yaml) {
    return {
      answer: statusOf(415, "UnsupportedMediaType",
        `the body of the request was in an unknown format - accepted media types include: ${INPUT_TYPES.join(", ")}`, {}),
    };
  }
  try {
    return { value: yaml ? YAML.parse(raw) : JSON.parse(raw) };
  } catch (e) {
    const summary = raw.length > 30 ? `${raw.slice(0, 30)} ...` : raw;
    return {
      answer: badRequest(`the object provided is unrecognized (must be of type ${what}): couldn't get version/kind; json parse error: ${e.message} (${summary})`),
      problem: `not ${yaml ? "YAML" : "JSON"}: ${e.message}`,
    };
  }
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

// ---------------------------------------------------------------------------------------------
// Object metadata validation (k8s.io/apimachinery/pkg/api/validation/objectmeta.go) and Lease
// validation (pkg/apis/coordination/validation): ValidateLease on create, ValidateLeaseUpdate plus
// rest.BeforeUpdate's common fields on update.
function labelErrors(labels, field) {
  const errs = [];
  if (!isObj(labels)) return errs;
  for (const [k, v] of Object.entries(labels)) {
    for (const m of isQualifiedName(k)) errs.push(invalidField(field, k, m, `/metadata/labels/${ptrSeg(k)}`));
    if (typeof v === "string") for (const m of isValidLabelValue(v)) errs.push(invalidField(field, v, m, `/metadata/labels/${ptrSeg(k)}`));
  }
  return errs;
}
function annotationErrors(ann) {
  const errs = [];
  if (!isObj(ann)) return errs;
  let size = 0;
  for (const [k, v] of Object.entries(ann)) {
    for (const m of isQualifiedName(k.toLowerCase())) errs.push(invalidField("metadata.annotations", k, m, `/metadata/annotations/${ptrSeg(k)}`));
    size += Buffer.byteLength(k) + Buffer.byteLength(String(v));
  }
  if (size > 256 * 1024) errs.push(tooLongField("metadata.annotations", 256 * 1024));
  return errs;
}
function ownerReferenceErrors(refs) {
  const errs = [];
  if (!Array.isArray(refs)) return errs;
  let controller = "";
  refs.forEach((ref, i) => {
    if (!isObj(ref)) return;
    const base = `/metadata/ownerReferences/${i}`;
    const av = typeof ref.apiVersion === "string" ? ref.apiVersion : "";
    const version = av.includes("/") ? av.split("/").pop() : av;
    if (!version) errs.push(invalidField("metadata.ownerReferences.apiVersion", av, "version must not be empty", `${base}/apiVersion`));
    for (const f of ["kind", "name", "uid"]) {
      if (!ref[f]) errs.push(invalidField(`metadata.ownerReferences.${f}`, ref[f] || "", "must not be empty", `${base}/${f}`));
    }
    if (av === "v1" && ref.kind === "Event") errs.push(invalidField("metadata.ownerReferences", goRaw("v1.OwnerReference{...}"), "/v1, Kind=Event is disallowed from being an owner", base));
    if (ref.controller === true) {
      const cur = `${ref.kind}/${ref.name}`;
      if (controller) {
        errs.push(invalidField("metadata.ownerReferences", goRaw("[]v1.OwnerReference{...}"), `Only one reference can have Controller set to true. Found "true" in references for ${controller} and ${cur}`, base));
      } else {
        controller = cur;
      }
    }
  });
  return errs;
}
function finalizerErrors(fins) {
  const errs = [];
  if (!Array.isArray(fins)) return errs;
  fins.forEach((f, i) => {
    if (typeof f === "string") for (const m of isQualifiedName(f)) errs.push(invalidField("metadata.finalizers", f, m, `/metadata/finalizers/${i}`));
  });
  if (fins.includes("orphan") && fins.includes("foregroundDeletion")) {
    errs.push(invalidField("metadata.finalizers", fins, "finalizer orphan and foregroundDeletion cannot be both set", "/metadata/finalizers"));
  }
  return errs;
}
// ValidateObjectMetaAccessor's checks after the name's (namespace, generation, labels, ...).
function metaCommonErrors(md) {
  const errs = [];
  if (Number.isInteger(md.generation) && md.generation < 0) errs.push(invalidField("metadata.generation", md.generation, "must be greater than or equal to 0"));
  errs.push(...labelErrors(md.labels, "metadata.labels"), ...annotationErrors(md.annotations));
  errs.push(...ownerReferenceErrors(md.ownerReferences), ...finalizerErrors(md.finalizers));
  return errs;
}
// ValidateObjectMeta on create with a DNS-1123 subdomain name.
function metaCreateErrors(md) {
  const errs = [];
  if (typeof md.generateName === "string" && md.generateName) {
    const gn = md.generateName.replace(/-$/, "a"); // NameIsDNSSubdomain(prefix=true) allows a trailing '-'
    for (const m of isDNS1123Subdomain(gn)) errs.push(invalidField("metadata.generateName", md.generateName, m));
  }
  if (!md.name) errs.push(requiredField("metadata.name", "name or generateName is required"));
  else for (const m of isDNS1123Subdomain(md.name)) errs.push(invalidField("metadata.name", md.name, m));
  return errs.concat(metaCommonErrors(md));
}
// ValidateObjectMetaAccessorUpdate (new against old, after rest.BeforeUpdate kept the system fields).
function metaUpdateErrors(md, old) {
  const errs = [];
  if (old.deletionTimestamp) {
    const before = new Set(old.finalizers || []);
    const extra = [...new Set((md.finalizers || []).filter((f) => !before.has(f)))].sort();
    if (extra.length) errs.push(forbiddenField("metadata.finalizers", `no new finalizers can be added if the object is being deleted, found new finalizers ${goStringSlice(extra)}`));
  }
  if (!md.resourceVersion) errs.push(invalidField("metadata.resourceVersion", md.resourceVersion || "", "must be specified for an update"));
  const immutable = [["name", (x) => x], ["namespace", (x) => x], ["uid", (x) => x], ["creationTimestamp", goTime],
    ["deletionTimestamp", (x) => (x ? goTime(x) : null)], ["deletionGracePeriodSeconds", (x) => (x === undefined ? null : x)]];
  for (const [f, show] of immutable) {
    if (JSON.stringify(md[f] ?? null) !== JSON.stringify(old[f] ?? null)) errs.push(invalidField(`metadata.${f}`, show(md[f]), "field is immutable"));
  }
  errs.push(...labelErrors(md.labels, "metadata.labels"), ...annotationErrors(md.annotations), ...ownerReferenceErrors(md.ownerReferences));
  return errs;
}
function leaseSpecErrors(spec) {
  const errs = [];
  if (!isObj(spec)) return errs;
  if (Number.isInteger(spec.leaseDurationSeconds) && spec.leaseDurationSeconds <= 0) {
    errs.push(invalidField("spec.leaseDurationSeconds", spec.leaseDurationSeconds, "must be greater than 0"));
  }
  if (Number.isInteger(spec.leaseTransitions) && spec.leaseTransitions < 0) {
    errs.push(invalidField("spec.leaseTransitions", spec.leaseTransitions, "must be greater than or equal to 0"));
  }
  if (typeof spec.strategy === "string") {
    if (spec.strategy.split("/").length === 1) {
      if (spec.strategy !== "OldestEmulationVersion") errs.push(notSupportedField("spec.strategy.strategy", spec.strategy, ["OldestEmulationVersion"], "/spec/strategy"));
    } else {
      for (const m of isQualifiedName(spec.strategy)) errs.push(invalidField("spec.strategy.strategy", spec.strategy, m, "/spec/strategy"));
    }
  }
  if (spec.preferredHolder && !spec.strategy) errs.push(forbiddenField("spec.preferredHolder", "may only be specified if `strategy` is defined"));
  return errs;
}

// What is wrong with a decoded Lease body whatever is stored (for the validation log): the create
// validation for a POST, the update's need of a resourceVersion and the metadata and spec rules for
// a PUT or PATCH.
function bodyErrors(obj, operation) {
  const md = obj.metadata;
  if (operation === "create") {
    const errs = [...metaCreateErrors(md), ...leaseSpecErrors(obj.spec)];
    if (parseRV(typeof md.resourceVersion === "string" ? md.resourceVersion : null) > 0) errs.push(forbiddenField("metadata.resourceVersion", "may not be set on create"));
    return errs;
  }
  const errs = [...metaCommonErrors(md), ...leaseSpecErrors(obj.spec)];
  if (!md.resourceVersion || md.resourceVersion === "0") errs.push(invalidField("metadata.resourceVersion", goRaw("0x0"), "must be specified for an update"));
  return errs;
}

// Decodes a Lease body: {obj, warnings, problems (for the log), schemaErrs (422 field errors the
// schema found, e.g. required fields)} or {answer}.
function decodeLease(req, raw, query) {
  const rb = readBody(req, raw, "Lease");
  if (rb.answer) return { answer: rb.answer, problems: [{ path: "", message: rb.problem || "unsupported media type" }] };
  const body = rb.value;
  if (!isObj(body)) {
    return {
      answer: badRequest(`Lease in version "v1" cannot be handled as a Lease: json: cannot unmarshal ${jsonTypeName(body)} into Go value of type struct { APIVersion string "json:\\"apiVersion,omitempty\\""; Kind string "json:\\"kind,omitempty\\"" }`),
      problems: [{ path: "", message: "the body is not a JSON object" }],
    };
  }
  if ((body.apiVersion !== undefined && body.apiVersion !== "coordination.k8s.io/v1") || (body.kind !== undefined && body.kind !== "Lease")) {
    return {
      answer: badRequest(body.apiVersion !== undefined && body.apiVersion !== "coordination.k8s.io/v1"
        ? `the API version in the data (${body.apiVersion}) does not match the expected API version (coordination.k8s.io/v1)`
        : `Lease in version "v1" cannot be handled as a Lease: no kind "${body.kind}" is registered for version "coordination.k8s.io/v1" in scheme "pkg/api/legacyscheme/scheme.go:30"`),
      problems: [{ path: "/kind", message: `${body.apiVersion}/${body.kind} is not coordination.k8s.io/v1 Lease` }],
    };
  }
  const problems = [];
  if (body.apiVersion === undefined || body.kind === undefined) {
    problems.push({ path: "/apiVersion", message: "apiVersion and kind missing" }); // logged; kube-apiserver takes them from the URL
  }
  const unknown = [];
  const decode = [];
  const schemaErrs = [];
  for (const p of validateModel(Lease, body)) {
    if (p.path === "/apiVersion" || p.path === "/kind") continue;
    if (p.message === "unknown field") {
      unknown.push(p.path);
      problems.push(p);
    } else if (isDecodeProblem(p.message)) {
      if (valueAt(body, p.path) === null) continue; // null decodes as the zero value
      decode.push(p.path);
      problems.push(p);
    } else if (p.message === "required field missing") {
      if (!p.path.startsWith("/metadata/ownerReferences/")) schemaErrs.push(requiredField(p.path.slice(1).split("/").join("."), "", p.path));
      problems.push(p);
    } else {
      schemaErrs.push(invalidField(p.path.slice(1).split("/").join("."), valueAt(body, p.path), p.message, p.path));
      problems.push(p);
    }
  }
  // A MicroTime needs exactly six fractional digits, which the schema's date-time does not check.
  for (const f of ["acquireTime", "renewTime"]) {
    const ptr = `/spec/${f}`;
    const v = valueAt(body, ptr);
    if (typeof v === "string" && !decode.includes(ptr) && goTimeParseError(v, true)) {
      decode.push(ptr);
      problems.push({ path: ptr, message: `"${v}": a MicroTime must be RFC 3339 with exactly 6 fractional digits (2006-01-02T15:04:05.000000Z)` });
    }
  }
  if (decode.length) {
    const order = documentOrder(body);
    decode.sort((a, b) => order(a) - order(b));
    return { answer: badRequest(`Lease in version "v1" cannot be handled as a Lease: ${decodeErrorText(body, decode[0])}`), problems };
  }
  const validation = query.get("fieldValidation") || "";
  const unknownText = unknown.map((p) => `unknown field ${goQuote(p.slice(1).split("/").join("."))}`);
  if (unknown.length && validation === "Strict") {
    return { answer: badRequest(`Lease in version "v1" cannot be handled as a Lease: strict decoding error: ${unknownText.join(", ")}`), problems };
  }
  dropPaths(body, unknown);
  if (!isObj(body.metadata)) body.metadata = {};
  if (body.spec === null || body.spec === undefined) body.spec = {};
  for (const o of [body.metadata, body.spec]) for (const k of Object.keys(o)) if (o[k] === null) delete o[k];
  return { obj: body, warnings: validation === "Ignore" ? [] : unknownText, problems, schemaErrs };
}

// The create/update/patch options' validation (apis/meta/v1/validation: ValidateCreateOptions,
// ValidateUpdateOptions, ValidatePatchOptions, ValidateDryRun, ValidateFieldManager): 422 Invalid
// for kind CreateOptions/UpdateOptions/PatchOptions of group meta.k8s.io.
function optionsErrors(query, kind, patchType) {
  const errs = [];
  const dryRun = query.getAll("dryRun");
  if (dryRun.length && !dryRun.every((d) => d === "All")) errs.push(notSupportedField("dryRun", goRaw(goStringSlice(dryRun)), ["All"]));
  const fm = query.get("fieldManager");
  if (fm !== null) {
    if (fm.length > 128) errs.push({ type: "FieldValueTooLong", field: "fieldManager", detail: "must have at most 128 bytes", ptr: "" });
    [...fm].forEach((ch, i) => {
      if (/[\p{C}]/u.test(ch)) errs.push(invalidField("fieldManager", fm, `invalid character U+${ch.codePointAt(0).toString(16).toUpperCase().padStart(4, "0")} (at position ${i})`));
    });
  }
  const fv = query.get("fieldValidation");
  if (fv !== null && !["", "Ignore", "Warn", "Strict"].includes(fv)) errs.push(notSupportedField("fieldValidation", fv, ["", "Ignore", "Warn", "Strict"]));
  if (kind === "PatchOptions" && query.has("force") && patchType !== "application/apply-patch+yaml") {
    errs.push(forbiddenField("force", "may not be specified for non-apply patch"));
  }
  return errs.length ? invalidStatus("meta.k8s.io", kind, "", errs) : undefined;
}
const isDryRun = (query) => query.getAll("dryRun").includes("All");

// ---------------------------------------------------------------------------------------------
// Label selectors: a port of k8s.io/apimachinery/pkg/labels/selector.go (lexer, parser,
// NewRequirement's validation, Matches), errors worded as there.
const TOK = { ERR: 0, EOS: 1, CPAR: 2, COMMA: 3, NOT: 4, DEQ: 5, EQ: 6, GT: 7, ID: 8, IN: 9, LT: 10, NEQ: 11, NOTIN: 12, OPAR: 13 };
const STRING2TOKEN = { ")": TOK.CPAR, ",": TOK.COMMA, "!": TOK.NOT, "==": TOK.DEQ, "=": TOK.EQ, ">": TOK.GT, in: TOK.IN, "<": TOK.LT, "!=": TOK.NEQ, notin: TOK.NOTIN, "(": TOK.OPAR };
const isSpecial = (c) => "=!(),><".includes(c);
const isWhite = (c) => c === " " || c === "\t" || c === "\r" || c === "\n";
function lexSelector(s) {
  let pos = 0;
  const items = [];
  for (;;) {
    while (pos < s.length && isWhite(s[pos])) pos++;
    if (pos >= s.length) {
      items.push({ tok: TOK.EOS, lit: "" });
      return items;
    }
    if (isSpecial(s[pos])) {
      let buf = "";
      let last = null;
      while (pos < s.length && isSpecial(s[pos])) {
        buf += s[pos];
        if (STRING2TOKEN[buf] !== undefined) {
          last = { tok: STRING2TOKEN[buf], lit: buf };
          pos++;
        } else if (last) {
          break;
        } else {
          pos++;
        }
      }
      items.push(last || { tok: TOK.ERR, lit: `error expected: keyword found '${buf}'` });
    } else {
      let buf = "";
      while (pos < s.length && !isSpecial(s[pos]) && !isWhite(s[pos])) buf += s[pos++];
      items.push(STRING2TOKEN[buf] !== undefined ? { tok: STRING2TOKEN[buf], lit: buf } : { tok: TOK.ID, lit: buf });
    }
  }
}
class SelectorError extends Error {}
function parseLabelSelector(s) {
  const items = lexSelector(s);
  let p = 0;
  // In a value context "in" and "notin" are identifiers.
  const look = (values) => {
    const it = items[p];
    return values && (it.tok === TOK.IN || it.tok === TOK.NOTIN) ? { tok: TOK.ID, lit: it.lit } : it;
  };
  const take = (values) => {
    const it = look(values);
    p++;
    return it;
  };
  const fail = (m) => {
    throw new SelectorError(m);
  };
  const keyError = (k) => {
    const msgs = isQualifiedName(k);
    return msgs.length ? `<nil>: Invalid value: ${goQuote(k)}: ${msgs.join("; ")}` : undefined;
  };
  const requirement = () => {
    let op;
    let it = take(true);
    if (it.tok === TOK.NOT) {
      op = "!";
      it = take(true);
    }
    if (it.tok !== TOK.ID) fail(`found '${it.lit}', expected: identifier`);
    const key = it.lit;
    const ke = keyError(key);
    if (ke) fail(ke);
    const nt = look(true).tok;
    if (nt === TOK.EOS || nt === TOK.COMMA) return validateRequirement(key, op === "!" ? "!" : "exists", []);
    if (op === "!") fail(`found '${look(false).lit}', expected: ',' or 'end of string'`); // unreachable in Go too
    const o = take(false);
    const ops = { [TOK.IN]: "in", [TOK.EQ]: "=", [TOK.DEQ]: "==", [TOK.GT]: "gt", [TOK.LT]: "lt", [TOK.NOTIN]: "notin", [TOK.NEQ]: "!=" };
    op = ops[o.tok];
    if (!op) fail(`found '${o.lit}', expected: in, notin, =, ==, !=, gt, lt`);
    let values;
    if (op === "in" || op === "notin") {
      const open = take(true);
      if (open.tok !== TOK.OPAR) fail(`found '${open.lit}' expected: '('`);
      const first = look(true);
      if (first.tok === TOK.ID || first.tok === TOK.COMMA) {
        values = new Set();
        for (;;) {
          const v = take(true);
          if (v.tok === TOK.ID) {
            values.add(v.lit);
            const n = look(true);
            if (n.tok === TOK.COMMA) continue;
            if (n.tok === TOK.CPAR) break;
            fail(`found '${n.lit}', expected: ',' or ')'`);
          } else if (v.tok === TOK.COMMA) {
            if (!values.size) values.add("");
            const n = look(true).tok;
            if (n === TOK.CPAR) {
              values.add("");
              break;
            }
            if (n === TOK.COMMA) values.add("");
          } else {
            fail(`found '${v.lit}', expected: ',', or identifier`);
          }
        }
        if (take(true).tok !== TOK.CPAR) fail(`found '${first.lit}', expected: ')'`);
      } else if (first.tok === TOK.CPAR) {
        take(true);
        values = new Set([""]);
      } else {
        fail(`found '${first.lit}', expected: ',', ')' or identifier`);
      }
    } else {
      const n = look(true);
      if (n.tok === TOK.EOS || n.tok === TOK.COMMA) values = new Set([""]);
      else {
        const v = take(true);
        if (v.tok !== TOK.ID) fail(`found '${v.lit}', expected: identifier`);
        values = new Set([v.lit]);
      }
    }
    return validateRequirement(key, op, [...values].sort());
  };
  const reqs = [];
  for (;;) {
    const it = look(true);
    if (it.tok === TOK.ID || it.tok === TOK.NOT) {
      try {
        reqs.push(requirement());
      } catch (e) {
        if (e instanceof SelectorError) throw new SelectorError(`unable to parse requirement: ${e.message}`);
        throw e;
      }
      const t = take(true);
      if (t.tok === TOK.EOS) break;
      if (t.tok === TOK.COMMA) {
        const n = look(true);
        if (n.tok !== TOK.ID && n.tok !== TOK.NOT) throw new SelectorError(`found '${n.lit}', expected: identifier after ','`);
      } else {
        throw new SelectorError(`found '${t.lit}', expected: ',' or 'end of string'`);
      }
    } else if (it.tok === TOK.EOS) {
      break;
    } else {
      throw new SelectorError(`found '${it.lit}', expected: !, identifier, or 'end of string'`);
    }
  }
  return reqs.sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
}
// NewRequirement's checks; an aggregate of field errors.
function validateRequirement(key, op, vals) {
  const errs = [];
  if ((op === "in" || op === "notin") && !vals.length) errs.push(`values: Invalid value: ${goStringSlice(vals)}: for 'in', 'notin' operators, values set can't be empty`);
  if (["=", "==", "!="].includes(op) && vals.length !== 1) errs.push(`values: Invalid value: ${goStringSlice(vals)}: exact-match compatibility requires one single value`);
  if (op === "gt" || op === "lt") {
    if (vals.length !== 1) errs.push(`values: Invalid value: ${goStringSlice(vals)}: for 'Gt', 'Lt' operators, exactly one value is required`);
    vals.forEach((v, i) => {
      if (!/^[+-]?\d+$/.test(v) || !Number.isSafeInteger(Number(v))) errs.push(`values[${i}]: Invalid value: ${goQuote(v)}: for 'Gt', 'Lt' operators, the value must be an integer`);
    });
  }
  vals.forEach((v, i) => {
    const msgs = isValidLabelValue(v);
    if (msgs.length) errs.push(`values[${i}][${key}]: Invalid value: ${goQuote(v)}: ${msgs.join("; ")}`);
  });
  if (errs.length) throw new SelectorError(errs.length === 1 ? errs[0] : `[${errs.join(", ")}]`);
  return { key, op, values: vals };
}
function labelsMatch(reqs, labels = {}) {
  labels = labels || {};
  return reqs.every((r) => {
    const has = Object.prototype.hasOwnProperty.call(labels, r.key);
    const v = labels[r.key];
    switch (r.op) {
      case "in": case "=": case "==": return has && r.values.includes(v);
      case "notin": case "!=": return !has || !r.values.includes(v);
      case "exists": return has;
      case "!": return !has;
      case "gt": case "lt": {
        if (!has || !/^[+-]?\d+$/.test(v)) return false;
        return r.op === "gt" ? Number(v) > Number(r.values[0]) : Number(v) < Number(r.values[0]);
      }
      default: return false;
    }
  });
}

// Field selectors (k8s.io/apimachinery/pkg/fields/selector.go ParseSelector), with the fields each
// resource supports (Leases: metadata.name and metadata.namespace, runtime's
// DefaultMetaV1FieldSelectorConversion; Nodes: metadata.name, spec.unschedulable; Namespaces:
// metadata.name, status.phase).
function parseFieldSelector(s, r) {
  const terms = [];
  let cur = "";
  for (let i = 0; i < s.length; i++) {
    if (s[i] === "\\" && i + 1 < s.length) {
      cur += s[i] + s[++i];
    } else if (s[i] === ",") {
      terms.push(cur);
      cur = "";
    } else {
      cur += s[i];
    }
  }
  terms.push(cur);
  const out = [];
  for (const term of terms.sort()) {
    if (!term) continue;
    let m = null;
    for (let i = 0; i < term.length && !m; i++) {
      for (const op of ["!=", "==", "="]) {
        if (term.startsWith(op, i)) {
          m = { field: term.slice(0, i), op, value: term.slice(i + op.length) };
          break;
        }
      }
    }
    if (!m) throw new SelectorError(`invalid selector: '${s}'; can't understand '${term}'`);
    let value = "";
    for (let i = 0; i < m.value.length; i++) {
      if (m.value[i] === "\\") {
        const n = m.value[++i];
        if (n !== "\\" && n !== "," && n !== "=") throw new SelectorError(`invalid field selector: invalid escape sequence: \\${n || ""}`);
        value += n;
      } else if (m.value[i] === "," || m.value[i] === "=") {
        throw new SelectorError(`invalid field selector: unescaped character: ${m.value[i]}`);
      } else {
        value += m.value[i];
      }
    }
    const supported = r === LEASES ? ["metadata.name", "metadata.namespace"] : r === NODES ? ["metadata.name", "spec.unschedulable"] : ["metadata.name", "status.phase"];
    if (!supported.includes(m.field)) {
      throw new SelectorError(r === LEASES
        ? `${goQuote(m.field)} is not a known field selector: only "metadata.name", "metadata.namespace"`
        : `field label not supported: ${m.field}`);
    }
    out.push({ field: m.field, neg: m.op === "!=", value });
  }
  return out;
}
function fieldsMatch(terms, obj) {
  return terms.every((t) => {
    const v = t.field === "metadata.name" ? obj.metadata.name
      : t.field === "metadata.namespace" ? obj.metadata.namespace || ""
      : t.field === "spec.unschedulable" ? String(!!obj.spec?.unschedulable)
      : t.field === "status.phase" ? obj.status?.phase || "" : "";
    return t.neg ? v !== t.value : v === t.value;
  });
}

// ---------------------------------------------------------------------------------------------
// Objects as kube-apiserver writes them: kind and apiVersion first, ObjectMeta's fields in Go's
// order, empty maps and lists left out (omitempty).
const META_ORDER = ["name", "generateName", "namespace", "selfLink", "uid", "resourceVersion", "generation",
  "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds", "labels", "annotations",
  "ownerReferences", "finalizers", "managedFields"];
function canonMeta(md) {
  const m = {};
  for (const k of META_ORDER) {
    const v = md[k];
    if (v === undefined || v === null || v === "" || (Array.isArray(v) && !v.length) || (isObj(v) && !Object.keys(v).length)) continue;
    if (k === "generation" && v === 0) continue;
    m[k] = v;
  }
  return m;
}
const SPEC_ORDER = ["holderIdentity", "leaseDurationSeconds", "acquireTime", "renewTime", "leaseTransitions", "strategy", "preferredHolder"];
function canonLease(o) {
  const spec = {};
  for (const k of SPEC_ORDER) if (o.spec && o.spec[k] !== undefined && o.spec[k] !== null) spec[k] = o.spec[k];
  return { kind: "Lease", apiVersion: "coordination.k8s.io/v1", metadata: canonMeta(o.metadata || {}), spec };
}
function canonOf(r, o) {
  if (r === LEASES) return canonLease(o);
  return { kind: r.kind, apiVersion: groupVersion(r), metadata: canonMeta(o.metadata || {}), spec: o.spec || {}, status: o.status || {} };
}
// The object as stored: no resourceVersion (it is the key's mod_revision), no apiVersion/kind.
function stored(o) {
  const s = clone(o);
  delete s.apiVersion;
  delete s.kind;
  delete s.metadata.resourceVersion;
  return s;
}
// A list item: kube-apiserver's list items carry no apiVersion/kind.
function listItem(r, o) {
  const c = canonOf(r, o);
  delete c.kind;
  delete c.apiVersion;
  return c;
}

// ---------------------------------------------------------------------------------------------
// Namespaces: the defaults exist from the start; tests add and remove others on the admin path.
// The NamespaceLifecycle admission plugin reads them through an informer; this cache stands in
// for it (refreshed on the admin path, or after 5 s), with a live read on a miss as there.
const nsCache = new Map(); // name -> {obj, at}
let defaultsReady = false;
let defaultsFailedAt = 0;
function namespaceObject(name, labels) {
  return {
    metadata: {
      name, uid: crypto.randomUUID(), creationTimestamp: now(),
      labels: { "kubernetes.io/metadata.name": name, ...(labels || {}) },
    },
    spec: { finalizers: ["kubernetes"] },
    status: { phase: "Active" },
  };
}
async function ensureDefaultNamespaces() {
  if (defaultsReady) return;
  if (Date.now() - defaultsFailedAt < 1000) return;
  try {
    for (const name of DEFAULT_NAMESPACES) {
      const key = objKey(NAMESPACES, undefined, name);
      await etcdTxn(key, "CREATE", 0, [putOp(key, namespaceObject(name))]);
    }
    defaultsReady = true;
  } catch (e) {
    defaultsFailedAt = Date.now();
    console.error(`k8s-emulator: cannot create the default namespaces yet: ${e.message}`);
  }
}
async function readNamespace(name, live) {
  const c = nsCache.get(name);
  if (!live && c && Date.now() - c.at < 5000) return c.obj;
  const kv = await etcdGet(objKey(NAMESPACES, undefined, name));
  const obj = kv ? decodeKv(kv) : null;
  nsCache.set(name, { obj, at: Date.now() });
  return obj;
}
// NamespaceLifecycle (apiserver/pkg/admission/plugin/namespace/lifecycle) for a create or an
// update in namespace ns: 404 when the namespace does not exist, 403 for a create while it is
// being terminated.
async function namespaceLifecycle(operation, r, ns, name) {
  let n = await readNamespace(ns, false);
  if (!n) n = await readNamespace(ns, true);
  if (!n) return notFound(NAMESPACES, ns);
  if (operation === "create" && n.status?.phase === "Terminating") {
    return forbiddenStatus(r, name, `unable to create new content in namespace ${ns} because it is being terminated`,
      [{ reason: "NamespaceTerminating", message: `namespace ${ns} is being terminated`, field: "metadata.namespace" }]);
  }
  return undefined;
}
async function adminCreateNamespace(raw) {
  let body;
  try {
    body = JSON.parse(raw || "{}");
  } catch (e) {
    return badRequest(`not JSON: ${e.message}`);
  }
  const name = body.name || body.metadata?.name;
  if (typeof name !== "string" || isDNS1123Label(name).length) return badRequest("a namespace needs a name (a DNS-1123 label)");
  const obj = namespaceObject(name, body.labels || body.metadata?.labels);
  const key = objKey(NAMESPACES, undefined, name);
  const t = await etcdTxn(key, "CREATE", 0, [putOp(key, obj)]);
  if (!t.succeeded) return alreadyExists(NAMESPACES, name);
  obj.metadata.resourceVersion = t.revision;
  nsCache.set(name, { obj, at: Date.now() });
  return ok(201, canonOf(NAMESPACES, obj));
}
// ?terminating=true: the namespace stays, in phase Terminating (NamespaceLifecycle then refuses
// creates in it), its content too; otherwise it goes at once with every Lease in it (what the
// namespace controller ends with).
async function adminDeleteNamespace(name, query) {
  if (IMMORTAL_NAMESPACES.has(name)) return forbiddenStatus(NAMESPACES, name, "this namespace may not be deleted");
  const key = objKey(NAMESPACES, undefined, name);
  const kv = await etcdGet(key);
  if (!kv) return notFound(NAMESPACES, name);
  if (query.get("terminating") === "true") {
    const obj = decodeKv(kv);
    obj.metadata.deletionTimestamp = obj.metadata.deletionTimestamp || now();
    obj.status = { phase: "Terminating" };
    const t = await etcdTxn(key, "MOD", kv.mod_revision, [putOp(key, stored(obj))]);
    if (!t.succeeded) return conflict(NAMESPACES, name, MODIFIED);
    obj.metadata.resourceVersion = t.revision;
    nsCache.set(name, { obj, at: Date.now() });
    return ok(200, canonOf(NAMESPACES, obj));
  }
  const p = listPrefix(LEASES, name);
  const t = await etcdTxn(key, "MOD", kv.mod_revision, [deleteOp(key), { request_delete_range: { key: b64(p), range_end: prefixEnd(p) } }]);
  if (!t.succeeded) return conflict(NAMESPACES, name, MODIFIED);
  nsCache.delete(name);
  const obj = decodeKv(kv);
  return ok(200, { kind: "Status", apiVersion: "v1", metadata: {}, status: "Success", details: { name, kind: "namespaces", uid: obj.metadata.uid } });
}

// ---------------------------------------------------------------------------------------------
// Reads: get, and list with label and field selectors, limit/continue (the etcd3 store's GetList
// paging) and resourceVersion (NotOlderThan, Exact).
async function currentRevision() {
  const r = await etcd("kv/range", { key: b64(`${opts.prefix}/`), range_end: prefixEnd(`${opts.prefix}/`), count_only: true });
  return Number(r.header.revision);
}
function parseRV(s) {
  if (s === null || s === "" || s === "0") return 0;
  if (!/^\d+$/.test(s)) return NaN;
  return Number(s);
}
// A resourceVersion newer than etcd's revision: kube-apiserver waits for it (3 s), then 504.
async function waitForRevision(rv) {
  for (let i = 0; i < 30; i++) {
    const cur = await currentRevision();
    if (cur >= rv) return undefined;
    await new Promise((res) => setTimeout(res, 100));
  }
  const cur = await currentRevision();
  return statusOf(504, "Timeout", `Too large resource version: ${rv}, current: ${cur}`,
    { causes: [{ reason: "ResourceVersionTooLarge", message: "Too large resource version" }], retryAfterSeconds: 1 });
}
async function getObject(r, ns, name, query) {
  const rv = parseRV(query.get("resourceVersion"));
  if (Number.isNaN(rv)) return badRequest(`invalid resource version: resourceVersion: Invalid value: ${goQuote(query.get("resourceVersion"))}: strconv.ParseUint: parsing ${goQuote(query.get("resourceVersion"))}: invalid syntax`);
  if (rv > 0) {
    const late = await waitForRevision(rv);
    if (late) return late;
  }
  const kv = await etcdGet(objKey(r, ns, name));
  if (!kv) return notFound(r, name);
  return ok(200, canonOf(r, decodeKv(kv)));
}
function encodeContinue(key, keyPrefix, rv) {
  return Buffer.from(JSON.stringify({ v: "meta.k8s.io/v1", rv, start: key.slice(keyPrefix.length) })).toString("base64url");
}
function decodeContinue(token, keyPrefix) {
  let c;
  try {
    c = JSON.parse(Buffer.from(token, "base64url").toString("utf8"));
  } catch (e) {
    throw new SelectorError(`invalid continue token: continue key is not valid: ${e.message}`);
  }
  if (!isObj(c) || c.v !== "meta.k8s.io/v1") throw new SelectorError("invalid continue token: continue key is not valid: server does not recognize this encoded key");
  if (typeof c.start !== "string" || !c.start) throw new SelectorError("invalid continue token: continue key is not valid: encoded start key empty");
  if (c.start.includes("..") || c.start.startsWith("/")) throw new SelectorError("invalid continue token: continue key is not valid: key path is not valid");
  return { key: keyPrefix + c.start, rv: Number(c.rv) };
}
async function listObjects(r, ns, query) {
  let labelReqs = [];
  let fieldTerms = [];
  try {
    if (query.get("labelSelector")) labelReqs = parseLabelSelector(query.get("labelSelector"));
    if (query.get("fieldSelector")) fieldTerms = parseFieldSelector(query.get("fieldSelector"), r);
  } catch (e) {
    if (e instanceof SelectorError) return badRequest(e.message);
    throw e;
  }
  const rvText = query.get("resourceVersion");
  const match = query.get("resourceVersionMatch") || "";
  const rvErrs = [];
  if (match && !rvText) rvErrs.push(forbiddenField("resourceVersionMatch", "resourceVersionMatch is forbidden unless resourceVersion is provided"));
  if (match && query.get("continue")) rvErrs.push(forbiddenField("resourceVersionMatch", "resourceVersionMatch is forbidden when continue is provided"));
  if (match && !["Exact", "NotOlderThan"].includes(match)) rvErrs.push(notSupportedField("resourceVersionMatch", match, ["Exact", "NotOlderThan", ""]));
  if (match === "Exact" && rvText === "0") rvErrs.push(forbiddenField("resourceVersionMatch", "resourceVersionMatch \"exact\" is forbidden for resourceVersion \"0\""));
  if (rvErrs.length) return invalidStatus("meta.k8s.io", "ListOptions", "", rvErrs);
  const rv = parseRV(rvText);
  if (Number.isNaN(rv)) return badRequest(`invalid resource version: resourceVersion: Invalid value: ${goQuote(rvText)}: strconv.ParseUint: parsing ${goQuote(rvText)}: invalid syntax`);
  let limit = 0;
  if (query.get("limit")) {
    limit = Number(query.get("limit"));
    if (!Number.isInteger(limit) || limit < 0) return badRequest(`strconv.ParseInt: parsing ${goQuote(query.get("limit"))}: invalid syntax`);
  }
  const keyPrefix = listPrefix(r, ns);
  let start = keyPrefix;
  let withRev = 0;
  if (query.get("continue")) {
    if (rvText && rvText !== "0") return badRequest("specifying resource version is not allowed when using continue");
    let c;
    try {
      c = decodeContinue(query.get("continue"), keyPrefix);
    } catch (e) {
      if (e instanceof SelectorError) return badRequest(e.message);
      throw e;
    }
    start = c.key;
    if (c.rv > 0) withRev = c.rv;
  } else if (rv > 0) {
    if (match === "Exact") withRev = rv;
    else {
      const late = await waitForRevision(rv);
      if (late) return late;
    }
  }
  const items = [];
  let hasMore = false;
  let lastKey = null;
  let batch = limit;
  let resp;
  for (;;) {
    const reqBody = { key: b64(start), range_end: prefixEnd(keyPrefix) };
    if (limit > 0) reqBody.limit = String(batch);
    if (withRev) reqBody.revision = String(withRev);
    try {
      resp = await etcd("kv/range", reqBody);
    } catch (e) {
      if (/compacted/.test(e.message)) {
        return statusOf(410, "Expired", query.get("continue")
          ? "The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter, or use the continue token in this response to retrieve the remainder of the results. Continuing with the provided token results in an inconsistent list - objects that were created, modified, or deleted between the time the first chunk was returned and now may show up in the list."
          : "The resourceVersion for the provided list is too old.");
      }
      throw e;
    }
    hasMore = !!resp.more;
    for (const kv of resp.kvs || []) {
      if (limit > 0 && items.length >= limit) {
        hasMore = true;
        break;
      }
      lastKey = unb64(kv.key);
      const o = decodeKv(kv);
      if (labelsMatch(labelReqs, o.metadata.labels) && fieldsMatch(fieldTerms, o)) items.push(o);
    }
    if (!hasMore || limit === 0 || items.length >= limit) break;
    batch = Math.min(batch * 2, 10000);
    start = lastKey + "\u0000";
    if (!withRev) withRev = Number(resp.header.revision);
  }
  if (!withRev) withRev = Number(resp.header.revision);
  const meta = { resourceVersion: String(withRev) };
  if (hasMore && limit > 0) {
    meta.continue = encodeContinue(lastKey + "\u0000", keyPrefix, withRev);
    if (!labelReqs.length && !fieldTerms.length) meta.remainingItemCount = Number(resp.count) - limit;
  }
  return ok(200, { kind: `${r.kind}List`, apiVersion: groupVersion(r), metadata: meta, items: items.map((o) => listItem(r, o)) });
}

// ---------------------------------------------------------------------------------------------
// Leases: create, update (PUT, create-on-update), patch, delete with finalizers.
// genericregistry.Store with lease.Strategy: AllowCreateOnUpdate true, AllowUnconditionalUpdate
// false; no graceful deletion; garbage-collection finalizers as the Store handles them.
const GENERATE_CHARS = "bcdfghjklmnpqrstvwxz2456789";
function generateName(base) {
  const b = base.length > 58 ? base.slice(0, 58) : base;
  let s = "";
  for (let i = 0; i < 5; i++) s += GENERATE_CHARS[crypto.randomInt(GENERATE_CHARS.length)];
  return b + s;
}
// The metadata fields a client sets (the rest are the server's).
function clientMeta(md) {
  const m = {};
  for (const k of ["name", "generateName", "namespace", "uid", "resourceVersion", "generation", "creationTimestamp",
    "deletionTimestamp", "deletionGracePeriodSeconds", "labels", "annotations", "ownerReferences", "finalizers"]) {
    if (md[k] !== undefined) m[k] = clone(md[k]);
  }
  return m;
}
// rest.BeforeCreate (after FillObjectMetaSystemFields): namespace check, ValidateLease.
function prepareCreate(obj, ns, schemaErrs) {
  const md = clientMeta(obj.metadata);
  if (md.namespace !== undefined && md.namespace !== "" && md.namespace !== ns) {
    return { answer: badRequest("the namespace of the provided object does not match the namespace sent on the request") };
  }
  md.namespace = ns;
  md.uid = crypto.randomUUID();
  md.creationTimestamp = now();
  delete md.deletionTimestamp;
  delete md.deletionGracePeriodSeconds;
  delete md.resourceVersion;
  const out = { metadata: md, spec: clone(obj.spec) || {} };
  const errs = [...schemaErrs, ...metaCreateErrors(md), ...leaseSpecErrors(out.spec)];
  if (errs.length) return { answer: invalidStatus(LEASES.group, LEASES.kind, md.name || "", errs) };
  return { out };
}
// rest.BeforeUpdate: the server's fields kept, then validateCommonFields and ValidateLeaseUpdate.
function prepareUpdate(obj, cur, schemaErrs) {
  const md = clientMeta(obj.metadata);
  const old = cur.metadata;
  md.generation = old.generation;
  if (!md.uid) md.uid = old.uid;
  if (old.creationTimestamp) md.creationTimestamp = old.creationTimestamp;
  if (old.deletionTimestamp) md.deletionTimestamp = old.deletionTimestamp;
  if (old.deletionGracePeriodSeconds !== undefined && md.deletionGracePeriodSeconds === undefined) md.deletionGracePeriodSeconds = old.deletionGracePeriodSeconds;
  if (md.namespace === undefined || md.namespace === "") md.namespace = old.namespace;
  const out = { metadata: md, spec: clone(obj.spec) || {} };
  const common = [...metaCommonErrors(md), ...metaUpdateErrors(md, old)];
  const errs = [...schemaErrs, ...common, ...metaUpdateErrors(md, old), ...leaseSpecErrors(out.spec)];
  if (errs.length) return { answer: invalidStatus(LEASES.group, LEASES.kind, md.name || "", errs) };
  return { out };
}
// The stored form of a prepared object, to compare with what etcd has (a write that changes
// nothing is skipped, as GuaranteedUpdate does).
const storedText = (o) => JSON.stringify(stored(canonLease(o)));

async function createLease(ctx, ns, query) {
  const bad = optionsErrors(query, "CreateOptions");
  if (bad) return bad;
  const d = decodeLease(ctx.req, ctx.raw, query);
  ctx.record("Lease", d.problems || []);
  if (d.answer) return d.answer;
  const obj = d.obj;
  ctx.problems(bodyErrors(obj, "create"));
  if (!obj.metadata.name && typeof obj.metadata.generateName === "string" && obj.metadata.generateName) {
    obj.metadata.name = generateName(obj.metadata.generateName);
  }
  const name = typeof obj.metadata.name === "string" ? obj.metadata.name : "";
  // Mutating admission (NamespaceLifecycle) runs before the registry's create.
  const adm = await namespaceLifecycle("create", LEASES, ns, name);
  if (adm) return adm;
  const p = prepareCreate(obj, ns, d.schemaErrs);
  if (p.answer) return p.answer;
  // The etcd3 store refuses an object that carries a resourceVersion (storage.ErrResourceVersionSetOnCreate),
  // which reaches the client as a 500 without a reason.
  const rv = parseRV(typeof obj.metadata.resourceVersion === "string" ? obj.metadata.resourceVersion : null);
  if (rv > 0) {
    return statusOf(500, "", "resourceVersion should not be set on objects to be created");
  }
  const key = objKey(LEASES, ns, name);
  if (isDryRun(query)) {
    const kv = await etcdGet(key);
    if (kv) return alreadyExists(LEASES, name, decodeKv(kv).metadata.deletionTimestamp ? "object is being deleted: " : "");
    return { code: 201, body: canonLease(p.out), warnings: d.warnings };
  }
  const t = await etcdTxn(key, "CREATE", 0, [putOp(key, stored(canonLease(p.out)))]);
  if (!t.succeeded) {
    const deleting = t.kv && decodeKv(t.kv).metadata.deletionTimestamp;
    return alreadyExists(LEASES, name, deleting ? "object is being deleted: " : "");
  }
  p.out.metadata.resourceVersion = t.revision;
  return { code: 201, body: canonLease(p.out), warnings: d.warnings };
}

// The storage layer's precondition failure (storage.NewInvalidObjError), as a 409 Conflict.
function storagePreconditionFailed(name, key, what) {
  return conflict(LEASES, name, `StorageError: invalid object, Code: 4, Key: ${key}, ResourceVersion: 0, AdditionalErrorMsg: Precondition failed: ${what}`);
}

// Store.Update for a PUT (objFn: the new object from the current one) and a PATCH (the patch
// applied to the current one). Returns the answer.
async function updateLease(ctx, ns, name, query, d, { patch } = {}) {
  const key = objKey(LEASES, ns, name);
  const dry = isDryRun(query);
  for (let attempt = 0; attempt < 50; attempt++) {
    const kv = await etcdGet(key);
    const cur = kv ? decodeKv(kv) : null;
    let obj = d && d.obj;
    let schemaErrs = (d && d.schemaErrs) || [];
    let warnings = (d && d.warnings) || [];
    if (patch) {
      if (!cur) return notFound(LEASES, name); // a patch never creates (patcher.createNewObject)
      const pr = patch(cur);
      if (pr.answer) return pr.answer;
      ({ obj, schemaErrs, warnings } = pr);
    }
    // The storage precondition: the body's uid (rest.DefaultUpdatedObjectInfo.Preconditions),
    // checked against the stored object, or an empty one when there is none.
    const uidPre = obj.metadata.uid;
    if (!patch && uidPre && uidPre !== (cur ? cur.metadata.uid : "")) {
      return storagePreconditionFailed(name, key, `UID in precondition: ${uidPre}, UID in object meta: ${cur ? cur.metadata.uid : ""}`);
    }
    // Mutating admission, as the update handler's transformer: a create when nothing is stored.
    const adm = await namespaceLifecycle(cur ? "update" : "create", LEASES, ns, name);
    if (adm) return adm;
    const rvText = obj.metadata.resourceVersion;
    const newRV = parseRV(typeof rvText === "string" ? rvText : rvText === undefined ? null : String(rvText));
    if (Number.isNaN(newRV)) {
      return statusOf(422, "Invalid", `resourceVersion: Invalid value: ${goQuote(rvText)}: strconv.ParseUint: parsing ${goQuote(rvText)}: invalid syntax`);
    }
    if (!cur) {
      // Create on update (lease.Strategy.AllowCreateOnUpdate); the user needs the create verb too.
      const p = prepareCreate(obj, ns, schemaErrs);
      if (p.answer) return p.answer;
      if (!authorized(ctx.user, "create", LEASES, ns)) return forbiddenStatus(LEASES, name, "");
      if (dry) return { code: 201, body: canonLease(p.out), warnings };
      const t = await etcdTxn(key, "CREATE", 0, [putOp(key, stored(canonLease(p.out)))]);
      if (!t.succeeded) continue; // created meanwhile: GuaranteedUpdate reads it and tries again
      p.out.metadata.resourceVersion = t.revision;
      return { code: 201, body: canonLease(p.out), warnings };
    }
    if (newRV === 0) {
      const e = invalidField("metadata.resourceVersion", goRaw("0x0"), "must be specified for an update");
      return invalidStatus(LEASES.group, LEASES.resource, name, [e]);
    }
    if (String(newRV) !== cur.metadata.resourceVersion) return conflict(LEASES, name, MODIFIED);
    const p = prepareUpdate(obj, cur, schemaErrs);
    if (p.answer) return p.answer;
    const out = p.out;
    // Store.ShouldDeleteDuringUpdate: the last finalizer of an object being deleted is gone.
    const old = cur.metadata;
    if (!(out.metadata.finalizers || []).length && old.deletionTimestamp && !old.deletionGracePeriodSeconds) {
      if (dry) return { code: 200, body: canonLease(out), warnings };
      const t = await etcdTxn(key, "MOD", kv.mod_revision, [deleteOp(key)]);
      if (!t.succeeded) continue;
      return { code: 200, body: canonLease(out), warnings };
    }
    if (storedText(out) === storedText(cur)) return { code: 200, body: canonLease(cur), warnings };
    if (dry) return { code: 200, body: canonLease(out), warnings };
    const t = await etcdTxn(key, "MOD", kv.mod_revision, [putOp(key, stored(canonLease(out)))]);
    if (t.succeeded) {
      out.metadata.resourceVersion = t.revision;
      return { code: 200, body: canonLease(out), warnings };
    }
    // Modified meanwhile: GuaranteedUpdate reads it again (and the resourceVersion check then fails).
  }
  return conflict(LEASES, name, MODIFIED);
}

async function putLease(ctx, ns, name, query) {
  const bad = optionsErrors(query, "UpdateOptions");
  if (bad) return bad;
  const d = decodeLease(ctx.req, ctx.raw, query);
  ctx.record("Lease", d.problems || []);
  if (d.answer) return d.answer;
  ctx.problems(bodyErrors(d.obj, "update"));
  // handlers.checkName: the body's name and namespace against the URL's.
  const md = d.obj.metadata;
  if (md.name !== name) return badRequest(`the name of the object (${md.name ?? ""}) does not match the name on the URL (${name})`);
  if (md.namespace && md.namespace !== ns) return badRequest(`the namespace of the object (${md.namespace}) does not match the namespace on the URL (${ns})`);
  return updateLease(ctx, ns, name, query, d);
}

// JSON merge patch (RFC 7386).
function mergePatch(target, patch) {
  if (!isObj(patch)) return clone(patch);
  const out = isObj(target) ? clone(target) : {};
  for (const [k, v] of Object.entries(patch)) {
    if (v === null) delete out[k];
    else out[k] = mergePatch(out[k], v);
  }
  return out;
}
// Strategic merge patch for a Lease: a merge patch, except ObjectMeta's lists with a patch
// strategy (finalizers: merge as a set, $deleteFromPrimitiveList; ownerReferences: merge by uid,
// $patch: delete) and the $patch: replace/delete directives on maps.
function strategicPatch(target, patch, pathKey = "") {
  if (!isObj(patch)) return clone(patch);
  if (patch.$patch === "replace") {
    const p = { ...patch };
    delete p.$patch;
    return clone(p);
  }
  if (patch.$patch === "delete") return undefined;
  const out = isObj(target) ? clone(target) : {};
  for (const [k, v] of Object.entries(patch)) {
    if (k.startsWith("$setElementOrder/") || k === "$retainKeys") continue;
    if (k.startsWith("$deleteFromPrimitiveList/")) {
      const f = k.slice("$deleteFromPrimitiveList/".length);
      if (Array.isArray(out[f]) && Array.isArray(v)) out[f] = out[f].filter((x) => !v.includes(x));
      continue;
    }
    if (v === null) {
      delete out[k];
    } else if (pathKey === "metadata" && k === "finalizers" && Array.isArray(v)) {
      const cur = Array.isArray(out[k]) ? out[k] : [];
      out[k] = [...cur, ...v.filter((x) => !cur.includes(x))];
    } else if (pathKey === "metadata" && k === "ownerReferences" && Array.isArray(v)) {
      const cur = Array.isArray(out[k]) ? clone(out[k]) : [];
      for (const ref of v) {
        const i = cur.findIndex((c) => c.uid === ref.uid);
        if (isObj(ref) && ref.$patch === "delete") {
          if (i >= 0) cur.splice(i, 1);
        } else if (i >= 0) {
          cur[i] = strategicPatch(cur[i], ref, "ownerReference");
        } else {
          cur.push(clone(ref));
        }
      }
      out[k] = cur;
    } else {
      const r = strategicPatch(out[k], v, k);
      if (r === undefined) delete out[k];
      else out[k] = r;
    }
  }
  return out;
}
// JSON patch (RFC 6902).
function jsonPatch(doc, ops) {
  const unesc = (s) => s.replace(/~1/g, "/").replace(/~0/g, "~");
  const parse = (p) => {
    if (typeof p !== "string" || (p !== "" && !p.startsWith("/"))) throw new Error(`invalid JSON pointer: ${p}`);
    return p === "" ? [] : p.slice(1).split("/").map(unesc);
  };
  const parent = (d, segs) => {
    let o = d;
    for (const s of segs.slice(0, -1)) {
      if (o === null || typeof o !== "object" || !(s in o)) throw new Error(`doc is missing path: ${"/" + segs.join("/")}`);
      o = o[s];
    }
    return o;
  };
  let out = clone(doc);
  for (const op of ops) {
    if (!isObj(op)) throw new Error("invalid operation");
    const segs = parse(op.path);
    const get = (s) => {
      let o = out;
      for (const x of s) {
        if (o === null || typeof o !== "object" || !(x in o)) throw new Error(`doc is missing path: ${"/" + s.join("/")}`);
        o = o[x];
      }
      return o;
    };
    const add = (s, v) => {
      if (!s.length) {
        out = v;
        return;
      }
      const p = parent(out, s);
      const l = s[s.length - 1];
      if (Array.isArray(p)) {
        const i = l === "-" ? p.length : Number(l);
        if (!Number.isInteger(i) || i < 0 || i > p.length) throw new Error(`add operation does not apply: doc is missing path: ${"/" + s.join("/")}`);
        p.splice(i, 0, v);
      } else {
        p[l] = v;
      }
    };
    const remove = (s) => {
      const p = parent(out, s);
      const l = s[s.length - 1];
      if (Array.isArray(p)) {
        const i = Number(l);
        if (!Number.isInteger(i) || i < 0 || i >= p.length) throw new Error(`remove operation does not apply: doc is missing path: ${"/" + s.join("/")}`);
        p.splice(i, 1);
      } else {
        if (!(l in p)) throw new Error(`remove operation does not apply: doc is missing path: ${"/" + s.join("/")}`);
        delete p[l];
      }
    };
    switch (op.op) {
      case "add": add(segs, clone(op.value)); break;
      case "remove": remove(segs); break;
      case "replace": get(segs); remove(segs); add(segs, clone(op.value)); break;
      case "move": { const from = parse(op.from); const v = get(from); remove(from); add(segs, v); break; }
      case "copy": add(segs, clone(get(parse(op.from)))); break;
      case "test": if (JSON.stringify(get(segs)) !== JSON.stringify(op.value)) throw new Error(`testing value ${op.path} failed: test failed`); break;
      default: throw new Error(`Unexpected kind: ${op.op}`);
    }
  }
  return out;
}
const PATCH_TYPES = ["application/json-patch+json", "application/merge-patch+json", "application/strategic-merge-patch+json"];
async function patchLease(ctx, ns, name, query) {
  const ct = String(ctx.req.headers["content-type"] || "").split(";")[0].trim();
  if (!PATCH_TYPES.includes(ct)) {
    return statusOf(415, "UnsupportedMediaType", `the body of the request was in an unknown format - accepted media types include: ${PATCH_TYPES.join(", ")}`, {});
  }
  const bad = optionsErrors(query, "PatchOptions", ct);
  if (bad) return bad;
  let patchBody;
  try {
    patchBody = JSON.parse(ctx.raw);
  } catch (e) {
    ctx.record("Patch", [{ path: "", message: `not JSON: ${e.message}` }]);
    return badRequest(`error decoding patch: ${e.message}`);
  }
  let logged = false;
  const apply = (cur) => {
    const doc = canonLease(cur);
    let patched;
    try {
      if (ct === "application/json-patch+json") {
        if (!Array.isArray(patchBody)) return { answer: badRequest("json: cannot unmarshal object into Go value of type jsonpatch.Patch") };
        patched = jsonPatch(doc, patchBody);
      } else if (ct === "application/merge-patch+json") {
        patched = mergePatch(doc, patchBody);
      } else {
        if (!isObj(patchBody)) return { answer: badRequest("json: cannot unmarshal array into Go value of type map[string]interface {}") };
        patched = strategicPatch(doc, patchBody);
      }
    } catch (e) {
      return { answer: statusOf(422, "Invalid", e.message) };
    }
    const fake = { headers: { "content-type": "application/json" }, method: ctx.req.method, url: ctx.req.url };
    const d = decodeLease(fake, JSON.stringify(patched), query);
    if (!logged) {
      ctx.record("Lease", d.problems || []);
      if (!d.answer) ctx.problems(bodyErrors(d.obj, "update"));
      logged = true;
    }
    if (d.answer) return { answer: d.answer };
    const md = d.obj.metadata;
    if (md.name !== name) return { answer: badRequest(`the name of the object (${md.name ?? ""}) does not match the name on the URL (${name})`) };
    if (md.namespace && md.namespace !== ns) return { answer: badRequest(`the namespace of the object (${md.namespace}) does not match the namespace on the URL (${ns})`) };
    return d;
  };
  return updateLease(ctx, ns, name, query, null, { patch: apply });
}

// DeleteOptions from the body or, without one, the query (handlers.DeleteResource).
function deleteOptions(ctx, query) {
  if (ctx.raw.length) {
    const rb = readBody(ctx.req, ctx.raw, "DeleteOptions");
    if (rb.answer) {
      ctx.record("DeleteOptions", [{ path: "", message: rb.problem || "unsupported media type" }]);
      return { answer: rb.answer };
    }
    const body = rb.value;
    const problems = isObj(body) ? validateModel(DeleteOptions, body).filter((p) => p.path !== "/apiVersion" && p.path !== "/kind") : [{ path: "", message: "not a JSON object" }];
    if (isObj(body) && (body.kind !== undefined || body.apiVersion !== undefined) &&
        (body.kind !== "DeleteOptions" || !["v1", "meta.k8s.io/v1", "coordination.k8s.io/v1"].includes(body.apiVersion))) {
      problems.push({ path: "/kind", message: `${body.apiVersion}/${body.kind} is not v1 DeleteOptions` });
    }
    const hard = problems.filter((p) => p.message !== "unknown field");
    ctx.record("DeleteOptions", problems);
    if (hard.length) {
      const first = hard[0];
      return { answer: badRequest(isDecodeProblem(first.message) && isObj(body)
        ? `json: cannot unmarshal ${jsonTypeName(valueAt(body, first.path))} into Go struct field DeleteOptions${first.path.split("/").join(".")} of type ${/uid|resourceVersion|propagationPolicy/.test(first.path) ? "string" : "int64"}`
        : `invalid DeleteOptions: ${hard.map((p) => `${p.path}: ${p.message}`).join("; ")}`) };
    }
    return { options: body };
  }
  const o = {};
  if (query.has("gracePeriodSeconds")) o.gracePeriodSeconds = Number(query.get("gracePeriodSeconds"));
  if (query.has("orphanDependents")) o.orphanDependents = query.get("orphanDependents") === "true";
  if (query.has("propagationPolicy")) o.propagationPolicy = query.get("propagationPolicy");
  if (query.has("dryRun")) o.dryRun = query.getAll("dryRun");
  return { options: o };
}
const GC_FINALIZERS = ["orphan", "foregroundDeletion"];
// The Store's deletionFinalizersForGarbageCollection for a Lease (no default GC policy).
function gcFinalizers(fins, o) {
  let orphan = false;
  let foreground = false;
  if (o.orphanDependents !== undefined && o.orphanDependents !== null) {
    orphan = !!o.orphanDependents;
  } else if (o.propagationPolicy) {
    orphan = o.propagationPolicy === "Orphan";
    foreground = o.propagationPolicy === "Foreground";
  } else {
    for (const f of fins) {
      if (f === "orphan") { orphan = true; break; }
      if (f === "foregroundDeletion") { foreground = true; break; }
    }
  }
  const out = fins.filter((f) => !GC_FINALIZERS.includes(f));
  if (orphan) out.push("orphan");
  if (foreground) out.push("foregroundDeletion");
  const same = new Set(out).size === new Set(fins).size && out.every((f) => fins.includes(f));
  return { changed: !same, finalizers: same ? fins : out };
}
async function deleteLease(ctx, ns, name, query) {
  const parsed = deleteOptions(ctx, query);
  if (parsed.answer) return parsed.answer;
  const o = parsed.options;
  // ValidateDeleteOptions (422, kind DeleteOptions of meta.k8s.io).
  const errs = [];
  if (o.orphanDependents !== undefined && o.orphanDependents !== null && o.propagationPolicy) {
    errs.push(invalidField("propagationPolicy", o.propagationPolicy, "orphanDependents and deletionPropagation cannot be both set"));
  }
  if (o.propagationPolicy && !["Foreground", "Background", "Orphan"].includes(o.propagationPolicy)) {
    errs.push(notSupportedField("propagationPolicy", o.propagationPolicy, ["Foreground", "Background", "Orphan", "nil"]));
  }
  const dryRun = Array.isArray(o.dryRun) ? o.dryRun : [];
  if (dryRun.length && !dryRun.every((x) => x === "All")) errs.push(notSupportedField("dryRun", goRaw(goStringSlice(dryRun)), ["All"]));
  if (errs.length) return invalidStatus("meta.k8s.io", "DeleteOptions", "", errs);
  const dry = dryRun.includes("All") || isDryRun(query);
  const pre = isObj(o.preconditions) ? o.preconditions : {};
  const key = objKey(LEASES, ns, name);
  for (let attempt = 0; attempt < 50; attempt++) {
    const kv = await etcdGet(key);
    if (!kv) return notFound(LEASES, name);
    const cur = decodeKv(kv);
    // rest.BeforeDelete: the preconditions, with the Kind as resource (GroupResource{Group, Kind}).
    if (pre.uid !== undefined && pre.uid !== null && pre.uid !== cur.metadata.uid) {
      return conflictOn(LEASES.group, LEASES.kind, name, `the UID in the precondition (${pre.uid}) does not match the UID in record (${cur.metadata.uid}). The object might have been deleted and then recreated`);
    }
    if (pre.resourceVersion !== undefined && pre.resourceVersion !== null && String(pre.resourceVersion) !== cur.metadata.resourceVersion) {
      return conflictOn(LEASES.group, LEASES.kind, name, `the ResourceVersion in the precondition (${pre.resourceVersion}) does not match the ResourceVersion in record (${cur.metadata.resourceVersion}). The object might have been modified`);
    }
    const fins = cur.metadata.finalizers || [];
    const gc = gcFinalizers(fins, o);
    if (fins.length || gc.changed) {
      // updateForGracefulDeletionAndFinalizers: finalizers pending, so the object is only marked
      // (markAsDeleting: deletionTimestamp now unless earlier, deletionGracePeriodSeconds 0).
      if (gc.finalizers.length) {
        const out = clone(cur);
        out.metadata.finalizers = gc.finalizers;
        if (!out.metadata.deletionTimestamp || new Date(out.metadata.deletionTimestamp) > new Date()) out.metadata.deletionTimestamp = now();
        out.metadata.deletionGracePeriodSeconds = 0;
        // 202 only when the client asked for cascading deletion with orphanDependents=false.
        const code = o.orphanDependents === false ? 202 : 200;
        if (dry || storedText(out) === storedText(cur)) return ok(code, canonLease(dry ? out : cur));
        const t = await etcdTxn(key, "MOD", kv.mod_revision, [putOp(key, stored(canonLease(out)))]);
        if (!t.succeeded) continue;
        out.metadata.resourceVersion = t.revision;
        if (gc.finalizers.some((f) => GC_FINALIZERS.includes(f))) setImmediate(() => collectGarbage(ns, name));
        return ok(code, canonLease(out));
      }
    }
    if (!dry) {
      const t = await etcdTxn(key, "MOD", kv.mod_revision, [deleteOp(key)]);
      if (!t.succeeded) continue; // modified meanwhile: the preconditions are checked again
    }
    // finalizeDelete: a Status naming what went (the Store does not return the deleted object).
    return ok(200, { kind: "Status", apiVersion: "v1", metadata: {}, status: "Success",
      details: { name, group: LEASES.group, kind: LEASES.resource, uid: cur.metadata.uid } });
  }
  return conflict(LEASES, name, MODIFIED);
}
// The garbage collector's part for an object with nothing depending on it: it drops the
// orphan/foregroundDeletion finalizer, which deletes the object when no other finalizer is left.
async function collectGarbage(ns, name) {
  const key = objKey(LEASES, ns, name);
  try {
    for (let attempt = 0; attempt < 20; attempt++) {
      const kv = await etcdGet(key);
      if (!kv) return;
      const cur = decodeKv(kv);
      const fins = (cur.metadata.finalizers || []).filter((f) => !GC_FINALIZERS.includes(f));
      if (fins.length === (cur.metadata.finalizers || []).length) return;
      const ops = fins.length ? [putOp(key, stored(canonLease({ ...cur, metadata: { ...cur.metadata, finalizers: fins } })))] : [deleteOp(key)];
      const t = await etcdTxn(key, "MOD", kv.mod_revision, ops);
      if (t.succeeded) return;
    }
  } catch (e) {
    console.error(`k8s-emulator: garbage collection of ${ns}/${name}: ${e.message}`);
  }
}

// ---------------------------------------------------------------------------------------------
// Nodes: clients may only get/list them; tests create and delete them on the admin path.
async function adminCreateNode(raw) {
  let body;
  try {
    body = JSON.parse(raw);
  } catch (e) {
    return badRequest(`not JSON: ${e.message}`);
  }
  const name = body.name || body.metadata?.name;
  if (typeof name !== "string" || isDNS1123Subdomain(name).length) return badRequest("a node needs a name (a DNS-1123 subdomain)");
  const obj = {
    metadata: { name, uid: crypto.randomUUID(), creationTimestamp: now(), labels: body.labels || body.metadata?.labels || { "kubernetes.io/hostname": name } },
    spec: {},
    status: { conditions: [{ type: "Ready", status: "True", lastHeartbeatTime: now(), lastTransitionTime: now(), reason: "KubeletReady", message: "emulated" }] },
  };
  const key = objKey(NODES, undefined, name);
  const t = await etcdTxn(key, "CREATE", 0, [putOp(key, obj)]);
  if (!t.succeeded) return alreadyExists(NODES, name);
  obj.metadata.resourceVersion = t.revision;
  return ok(201, canonOf(NODES, obj));
}
async function adminDeleteNode(name) {
  const key = objKey(NODES, undefined, name);
  const kv = await etcdGet(key);
  const r = await etcd("kv/deleterange", { key: b64(key) });
  if (!r.deleted || r.deleted === "0") return notFound(NODES, name);
  return ok(200, { kind: "Status", apiVersion: "v1", metadata: {}, status: "Success", details: { name, kind: "nodes", uid: kv ? decodeKv(kv).metadata.uid : undefined } });
}

// ---------------------------------------------------------------------------------------------
// Tables (meta.k8s.io Table, what `kubectl get` asks for), with the columns of kube-apiserver's
// printers (pkg/printers/internalversion: printLease, printNode, printNamespace).
function humanDuration(ms) {
  const sec = Math.floor(ms / 1000);
  if (sec < -1) return "<invalid>";
  if (sec < 0) return "0s";
  if (sec < 120) return `${sec}s`;
  const min = Math.floor(sec / 60);
  if (min < 10) return sec % 60 ? `${min}m${sec % 60}s` : `${min}m`;
  if (min < 180) return `${min}m`;
  const h = Math.floor(sec / 3600);
  if (h < 8) return min % 60 ? `${h}h${min % 60}m` : `${h}h`;
  if (h < 48) return `${h}h`;
  if (h < 192) return h % 24 ? `${Math.floor(h / 24)}d${h % 24}h` : `${Math.floor(h / 24)}d`;
  if (h < 24 * 365 * 2) return `${Math.floor(h / 24)}d`;
  if (h < 24 * 365 * 8) {
    const dy = Math.floor(h / 24) % 365;
    return dy ? `${Math.floor(h / 24 / 365)}y${dy}d` : `${Math.floor(h / 24 / 365)}y`;
  }
  return `${Math.floor(h / 24 / 365)}y`;
}
const age = (o) => (o.metadata.creationTimestamp ? humanDuration(Date.now() - Date.parse(o.metadata.creationTimestamp)) : "<unknown>");
const NAME_DOC = "Name must be unique within a namespace. Is required when creating resources, although some resources may allow a client to request the generation of an appropriate name automatically. Name is primarily intended for creation idempotence and configuration definition. Cannot be updated. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names";
const AGE_DOC = "CreationTimestamp is a timestamp representing the server time when this object was created. It is not guaranteed to be set in happens-before order across separate operations. Clients may not set this value. It is represented in RFC3339 form and is in UTC.\n\nPopulated by the system. Read-only. Null for lists. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata";
const col = (name, description, format = "", priority = 0) => ({ name, type: "string", format, description, priority });
const TABLES = {
  leases: {
    columns: [col("Name", NAME_DOC, "name"), col("Holder", "holderIdentity contains the identity of the holder of a current lease. If Coordinated Leader Election is used, the holder identity must be equal to the elected LeaseCandidate.metadata.name field."), col("Age", AGE_DOC)],
    cells: (o) => [o.metadata.name, o.spec?.holderIdentity ?? "", age(o)],
  },
  namespaces: {
    columns: [col("Name", NAME_DOC, "name"), col("Status", "The status of the namespace"), col("Age", AGE_DOC)],
    cells: (o) => [o.metadata.name, o.status?.phase || "", age(o)],
  },
  nodes: {
    columns: [col("Name", NAME_DOC, "name"), col("Status", "The status of the node"), col("Roles", "The roles of the node"), col("Age", AGE_DOC),
      col("Version", "Kubelet Version reported by the node."), col("Internal-IP", "List of internal IPs in the node.", "", 1),
      col("External-IP", "List of external IPs in the node.", "", 1), col("OS-Image", "OS Image reported by the node from /etc/os-release (e.g. Debian GNU/Linux 7 (wheezy)).", "", 1),
      col("Kernel-Version", "Kernel Version reported by the node from 'uname -r' (e.g. 3.16.0-0.bpo.4-amd64).", "", 1),
      col("Container-Runtime", "ContainerRuntime Version reported by the node through runtime remote API (e.g. containerd://1.4.2).", "", 1)],
    cells: (o) => {
      const ready = (o.status?.conditions || []).find((c) => c.type === "Ready");
      let st = !ready ? "Unknown" : ready.status === "True" ? "Ready" : ready.status === "False" ? "NotReady" : "Unknown";
      if (o.spec?.unschedulable) st += ",SchedulingDisabled";
      const roles = Object.keys(o.metadata.labels || {}).filter((l) => l.startsWith("node-role.kubernetes.io/")).map((l) => l.slice(24)).filter(Boolean).sort();
      const addr = (t) => (o.status?.addresses || []).filter((a) => a.type === t).map((a) => a.address).join(",") || "<none>";
      const info = o.status?.nodeInfo || {};
      return [o.metadata.name, st, roles.join(",") || "<none>", age(o), info.kubeletVersion || "", addr("InternalIP"), addr("ExternalIP"),
        info.osImage || "<unknown>", info.kernelVersion || "<unknown>", info.containerRuntimeVersion || "<unknown>"];
    },
  },
};
function toTable(r, body, version, includeObject) {
  const t = TABLES[r.resource];
  const isList = Array.isArray(body.items);
  const objs = isList ? body.items : [body];
  const rows = objs.map((o) => {
    const row = { cells: t.cells(o) };
    if (includeObject === "Object") row.object = canonOf(r, o);
    else if (includeObject !== "None") row.object = { kind: "PartialObjectMetadata", apiVersion: "meta.k8s.io/v1", metadata: o.metadata };
    return row;
  });
  const metadata = isList ? body.metadata : { resourceVersion: body.metadata.resourceVersion };
  return { kind: "Table", apiVersion: `meta.k8s.io/${version}`, metadata, columnDefinitions: t.columns, rows };
}
// Content negotiation of the answer (Accept): JSON, YAML, or a Table for get/list.
function negotiate(req) {
  const accept = String(req.headers.accept || "");
  if (!accept.trim()) return { type: "json" };
  for (const part of accept.split(",")) {
    const [mt, ...params] = part.trim().split(";").map((s) => s.trim());
    const p = Object.fromEntries(params.map((x) => x.split("=").map((s) => s.trim())));
    if (p.q === "0") continue;
    if (p.as === "Table" && mt === "application/json" && p.g === "meta.k8s.io" && (p.v === "v1" || p.v === "v1beta1")) return { type: "table", version: p.v };
    if (p.as) continue; // PartialObjectMetadata and others are not emulated
    if (mt === "application/json" || mt === "*/*" || mt === "application/*") return { type: "json" };
    if (mt === "application/yaml" && YAML) return { type: "yaml" };
  }
  return { type: "none" };
}

// ---------------------------------------------------------------------------------------------
// Discovery (/api, /apis, per group version) and /version.
function apiResource(r) {
  const out = { name: r.resource, singularName: r.singular, namespaced: r.namespaced, kind: r.kind, verbs: r.verbs };
  if (r.shortNames) out.shortNames = r.shortNames;
  return out;
}
function discovery(p, req) {
  const host = req.headers.host || `${opts.host}:${opts.port}`;
  if (p === "/api") return ok(200, { kind: "APIVersions", versions: ["v1"], serverAddressByClientCIDRs: [{ clientCIDR: "0.0.0.0/0", serverAddress: host }] });
  if (p === "/api/v1") return ok(200, { kind: "APIResourceList", groupVersion: "v1", resources: [apiResource(NAMESPACES), apiResource(NODES)] });
  const group = { name: "coordination.k8s.io", versions: [{ groupVersion: "coordination.k8s.io/v1", version: "v1" }], preferredVersion: { groupVersion: "coordination.k8s.io/v1", version: "v1" } };
  if (p === "/apis") return ok(200, { kind: "APIGroupList", apiVersion: "v1", groups: [group] });
  if (p === "/apis/coordination.k8s.io") return ok(200, { kind: "APIGroup", apiVersion: "v1", ...group });
  if (p === "/apis/coordination.k8s.io/v1") return ok(200, { kind: "APIResourceList", apiVersion: "v1", groupVersion: "coordination.k8s.io/v1", resources: [apiResource(LEASES)] });
  return undefined;
}
const versionInfo = () => ({
  major: SERVER_VERSION.major, minor: SERVER_VERSION.minor, gitVersion: SERVER_VERSION.gitVersion,
  gitCommit: "0000000000000000000000000000000000000000", gitTreeState: "clean", buildDate: "2025-01-01T00:00:00Z",
  goVersion: `node${process.versions.node}`, compiler: "gc", platform: `linux/${process.arch === "x64" ? "amd64" : process.arch}`,
});

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

// API requests being served now (a delayed one included): a test that made the API slow waits
// for 0 before it reads what a late write left (GET /_emulator/inflight).
let inflight = 0;

// Request counts per (verb, resource), for the benchmarks' "backend calls per ADD".
const stats = {};
function count(verb, resource, code) {
  const k = `${verb} ${resource}`;
  stats[k] = stats[k] || { total: 0, byCode: {} };
  stats[k].total++;
  stats[k].byCode[code] = (stats[k].byCode[code] || 0) + 1;
}

async function admin(req, raw, parts, query) {
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
  } else if (what === "namespaces") {
    await ensureDefaultNamespaces();
    if (req.method === "POST" && parts.length === 1) return adminCreateNamespace(raw);
    if (req.method === "DELETE" && parts.length === 2) return adminDeleteNamespace(parts[1], query);
  } else if (what === "validation") {
    if (req.method === "GET") return ok(200, vlog);
    if (req.method === "DELETE") { vlog.total = 0; vlog.invalid = 0; vlog.entries = []; return ok(200, vlog); }
  } else if (what === "inflight") {
    if (req.method === "GET") return ok(200, { inflight });
  } else if (what === "stats") {
    if (req.method === "GET") return ok(200, stats);
    if (req.method === "DELETE") { for (const k of Object.keys(stats)) delete stats[k]; return ok(200, stats); }
  }
  return routeNotFound();
}

// ---------------------------------------------------------------------------------------------
// Routing
const leasesRe = /^\/apis\/coordination\.k8s\.io\/v1\/namespaces\/([^/]+)\/leases(?:\/([^/]+))?(\/.*)?$/;
const allLeasesRe = /^\/apis\/coordination\.k8s\.io\/v1\/leases$/;
const nodesRe = /^\/api\/v1\/nodes(?:\/([^/]+))?(\/.*)?$/;
const namespacesRe = /^\/api\/v1\/namespaces(?:\/([^/]+))?$/;
const watchRe = /^\/(api\/v1|apis\/coordination\.k8s\.io\/v1)\/watch\//;
async function api(ctx, url) {
  const { req } = ctx;
  const p = url.pathname;
  const q = url.searchParams;
  let m, r, ns, name, sub;
  if ((m = leasesRe.exec(p))) { r = LEASES; ns = decodeURIComponent(m[1]); name = m[2] && decodeURIComponent(m[2]); sub = m[3]; }
  else if (allLeasesRe.test(p)) { r = LEASES; }
  else if ((m = nodesRe.exec(p))) { r = NODES; name = m[1] && decodeURIComponent(m[1]); sub = m[2]; }
  else if ((m = namespacesRe.exec(p))) { r = NAMESPACES; name = m[1] && decodeURIComponent(m[1]); }
  const watch = watchRe.test(p) || (req.method === "GET" && !name && ["true", "1"].includes(q.get("watch")));
  const verb = watch ? "watch" : { GET: name ? "get" : "list", POST: "create", PUT: "update", PATCH: "patch", DELETE: name ? "delete" : "deletecollection" }[req.method];
  const user = authenticate(req);
  if (user === undefined) return { verb: verb || req.method, resource: r ? r.resource : "-", answer: statusOf(401, "Unauthorized", "Unauthorized") };
  ctx.user = user;
  const notAcceptable = () => statusOf(406, "NotAcceptable", "only the following media types are accepted: application/json, application/yaml", {});
  if (!r || sub) {
    const d = !sub && req.method === "GET" ? discovery(p, req) : undefined;
    if (d) return { verb: "get", resource: "discovery", answer: ctx.neg.type === "none" ? notAcceptable() : d };
    if (watch) return { verb: "watch", resource: "-", answer: methodNotAllowed() };
    return { verb: verb || req.method, resource: "-", answer: routeNotFound() };
  }
  if (!verb) return { verb: req.method, resource: r.resource, answer: methodNotAllowed() };
  const resourceName = verb === "create" ? "" : name; // a create's name is not in the URL
  if (!authorized(user, verb, r, ns)) return { verb, resource: r.resource, answer: forbidden(user, verb, r, resourceName, ns) };
  if (!r.verbs.includes(verb) || (r === LEASES && ns === undefined && verb !== "list")) {
    // watch and deletecollection are not emulated; Nodes and Namespaces are read-only here.
    return { verb, resource: r.resource, answer: methodNotAllowed() };
  }
  if (ctx.neg.type === "none") return { verb, resource: r.resource, answer: notAcceptable() };
  await ensureDefaultNamespaces();
  let answer;
  if (verb === "get") answer = await getObject(r, ns, name, q);
  else if (verb === "list") answer = await listObjects(r, ns, q);
  else if (verb === "create") answer = await createLease(ctx, ns, q);
  else if (verb === "update") answer = await putLease(ctx, ns, name, q);
  else if (verb === "patch") answer = await patchLease(ctx, ns, name, q);
  else answer = await deleteLease(ctx, ns, name, q);
  return { verb, resource: r.resource, answer, r };
}

// Answers pretty-printed as kube-apiserver does for ?pretty=true and for curl and wget.
function isPretty(req, url) {
  const p = url.searchParams.get("pretty");
  if (p !== null) return p === "true" || p === "1";
  const ua = String(req.headers["user-agent"] || "");
  return ua.startsWith("curl") || ua.startsWith("Wget");
}
function send(res, answer, req, url, neg) {
  const headers = { "cache-control": "no-cache, private", "audit-id": crypto.randomUUID() };
  if (answer.warnings && answer.warnings.length) headers.warning = answer.warnings.map((w) => `299 - "${w.replace(/"/g, "'")}"`).join(", ");
  let text;
  if (neg && neg.type === "yaml") {
    headers["content-type"] = "application/yaml";
    text = YAML.stringify(answer.body);
  } else {
    headers["content-type"] = "application/json";
    text = (req && url && isPretty(req, url) ? JSON.stringify(answer.body, null, 2) : JSON.stringify(answer.body)) + "\n";
  }
  res.writeHead(answer.code, headers);
  res.end(text);
}

async function handle(req, res, raw) {
  const url = new URL(req.url, "http://emulator");
  if (url.pathname.startsWith("/_emulator/")) {
    return send(res, await admin(req, raw, url.pathname.slice("/_emulator/".length).split("/").filter(Boolean).map(decodeURIComponent), url.searchParams));
  }
  if (url.pathname === "/healthz" || url.pathname === "/readyz" || url.pathname === "/livez") {
    res.writeHead(200, { "content-type": "text/plain; charset=utf-8" });
    return res.end("ok");
  }
  if (url.pathname === "/version") return send(res, ok(200, versionInfo()), req, url);
  inflight++;
  try {
    return await serveApi(req, res, raw, url);
  } finally {
    inflight--;
  }
}

async function serveApi(req, res, raw, url) {
  const f = takeFault(req);
  if (f && f.delayMs) await new Promise((r) => setTimeout(r, Number(f.delayMs)));
  const faulty = f && (f.status || f.garbage || f.drop);
  if (faulty && !f.after) return answerFault(res, f);
  // The per-request context: the body, the user, and the validation log's record of the body.
  const ctx = {
    req, raw, user: undefined, rec: null,
    record(kind, problems) { this.rec = { kind, problems: problems.map((p) => ({ path: p.path, message: p.message })) }; },
    problems(errs) {
      if (!this.rec) return;
      for (const e of errs) this.rec.problems.push({ path: e.ptr || "", message: errorBody(e) });
    },
  };
  const neg = negotiate(req);
  ctx.neg = neg;
  let out;
  try {
    out = await api(ctx, url);
  } catch (e) {
    if (!(e instanceof EtcdError)) console.error(`k8s-emulator: ${e.stack}`);
    out = { verb: req.method, resource: "?", answer: internal(e.message) };
  }
  if (ctx.rec) recordValidation(req, ctx.rec.kind, ctx.rec.problems, out.answer.code >= 400 ? out.answer.code : "accepted");
  count(out.verb, out.resource, out.answer.code);
  if (faulty) return answerFault(res, f);
  let answer = out.answer;
  if (neg.type === "table" && out.r && (out.verb === "get" || out.verb === "list") && answer.code === 200) {
    answer = { ...answer, body: toTable(out.r, answer.body, neg.version, url.searchParams.get("includeObject") || "Metadata") };
  }
  send(res, answer, req, url, neg.type === "none" ? undefined : neg);
}
function answerFault(res, f) {
  if (f.drop) return res.socket.destroy();
  if (f.garbage) {
    res.writeHead(200, { "content-type": "application/json" });
    return res.end('{"kind":"Lease","apiVersion":"coordination.k8s.io/v1","metadata":{"name":\u0000 garbage <html>');
  }
  const code = Number(f.status);
  send(res, statusOf(code, code === 503 ? "ServiceUnavailable" : code === 504 ? "Timeout" : code === 429 ? "TooManyRequests" : "InternalError", f.message || "injected fault"));
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
    opts.port = server.address().port;
    process.stdout.write(`${server.address().port}\n`);
  });
  server.on("error", (e) => {
    console.error(`k8s-emulator: ${e.message}`);
    process.exit(1);
  });
  ensureDefaultNamespaces(); // not awaited: an etcd still starting is tried again on the next request
  const stop = () => { server.close(); process.exit(0); };
  process.on("SIGTERM", stop);
  process.on("SIGINT", stop);
}
main().catch((e) => {
  console.error(`k8s-emulator: ${e.stack}`);
  process.exit(1);
});
