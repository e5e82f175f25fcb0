#!/usr/bin/env node
// SPDX-License-Identifier: Apache-2.0
// A small fault proxy in front of a real kube-apiserver (control_plane.sh), for the tests: plain
// HTTP on a loopback port of its own, passed on over TLS to the server with the client's own
// Authorization header. It gives the API faults the real server cannot be made to produce (a lost
// answer, a 500, a dropped connection, a slow answer, garbage), counts the requests per verb and
// resource with their status codes and the server's warnings, and lets the test act as the cluster
// admin (the admin's client certificate) without a TLS client of its own. Node.js's standard
// library only.
//
//   node api_proxy.js --upstream https://127.0.0.1:P --ca CA --cert ADMIN.crt --key ADMIN.key \
//        --port-file FILE          # writes the port it listens on to FILE once it listens
//
// Its own paths (never passed on):
//   GET|POST|DELETE /_proxy/faults  the armed fault (POST a JSON object; {} or DELETE disarms):
//     {"status": 500}      answer that status with a Status body instead of passing the request on
//                          (its message: "message" when given)
//     {"garbage": true}    answer 200 with a body that is not JSON
//     {"drop": true}       close the connection without an answer
//     {"delayMs": N}       wait N ms first (alone: then pass it on)
//     {"after": true}      pass the request on first, then answer the fault (a lost answer)
//     {"count": N}         only the next N requests (unlimited when absent)
//     {"methods": ["POST"]}, {"pathContains": "..."}   only those requests
//   GET /_proxy/inflight            {"inflight": N}: API requests being served now (a delayed one
//                                   included; the proxy's own paths not counted)
//   GET|DELETE /_proxy/stats        {"<verb> <resource>": {"total", "byCode": {code: n}}}, and
//                                   "warnings": the server's Warning headers (the first 100)
//   ANY /_proxy/admin/<path>        <path> passed on as the cluster admin (the test's own set-up)
"use strict";

const http = require("http");
const https = require("https");
const fs = require("fs");

function arg(name) {
  const i = process.argv.indexOf(`--${name}`);
  if (i < 0 || i + 1 >= process.argv.length) {
    console.error(`api_proxy: --${name} is missing`);
    process.exit(2);
  }
  return process.argv[i + 1];
}

const upstream = new URL(arg("upstream"));
const ca = fs.readFileSync(arg("ca"));
const adminCert = fs.readFileSync(arg("cert"));
const adminKey = fs.readFileSync(arg("key"));
const portFile = arg("port-file");

const agent = new https.Agent({ keepAlive: true, ca });
const adminAgent = new https.Agent({ keepAlive: true, ca, cert: adminCert, key: adminKey });

// ---------------------------------------------------------------------------------------------
// Faults
let fault = null;
function takeFault(req) {
  if (!fault) return null;
  if (fault.methods && !fault.methods.includes(req.method)) return null;
  if (fault.pathContains && !req.url.includes(fault.pathContains)) return null;
  const f = fault;
  if (f.count !== undefined && --f.count <= 0) fault = null;
  return f;
}

// ---------------------------------------------------------------------------------------------
// Counts
let inflight = 0;
let stats = {};
let warnings = [];

// "<verb> <resource>" of an API path, as the API server's audit names them.
function verbAndResource(method, url) {
  const u = new URL(url, "http://proxy");
  const parts = u.pathname.split("/").filter(Boolean);
  let rest;
  if (parts[0] === "api") rest = parts.slice(2);
  else if (parts[0] === "apis") rest = parts.slice(3);
  else return { verb: method.toLowerCase(), resource: "-" };
  let watch = false;
  if (rest[0] === "watch") {
    watch = true;
    rest = rest.slice(1);
  }
  if (rest[0] === "namespaces" && rest.length > 2) rest = rest.slice(2);
  const resource = rest[0] || "-";
  const named = rest.length > 1;
  watch = watch || (method === "GET" && ["true", "1"].includes(u.searchParams.get("watch")));
  const verb = watch
    ? "watch"
    : { GET: named ? "get" : "list", POST: "create", PUT: "update", PATCH: "patch", DELETE: named ? "delete" : "deletecollection" }[method] ||
      method.toLowerCase();
  return { verb, resource: rest.length > 2 ? `${resource}/${rest[2]}` : resource };
}

function count(method, url, code) {
  const { verb, resource } = verbAndResource(method, url);
  const k = `${verb} ${resource}`;
  stats[k] = stats[k] || { total: 0, byCode: {} };
  stats[k].total++;
  stats[k].byCode[code] = (stats[k].byCode[code] || 0) + 1;
}

// ---------------------------------------------------------------------------------------------
// Answers
function sendJson(res, code, body) {
  const text = JSON.stringify(body) + "\n";
  res.writeHead(code, { "content-type": "application/json", "content-length": Buffer.byteLength(text) });
  res.end(text);
}
function status(code, reason, message) {
  return { kind: "Status", apiVersion: "v1", metadata: {}, status: "Failure", message, reason, code };
}

// Passes the request on; resolves to {code, headers, body} or rejects with the error.
function forward(req, body, path, asAdmin) {
  return new Promise((resolve, reject) => {
    const headers = { ...req.headers };
    delete headers.host;
    delete headers.connection;
    if (asAdmin) delete headers.authorization;
    const out = https.request(
      { host: upstream.hostname, port: upstream.port, method: req.method, path, headers, agent: asAdmin ? adminAgent : agent },
      (res) => {
        const chunks = [];
        res.on("data", (c) => chunks.push(c));
        res.on("end", () => resolve({ code: res.statusCode, headers: res.headers, body: Buffer.concat(chunks) }));
        res.on("error", reject);
      },
    );
    out.on("error", reject);
    out.end(body);
  });
}

function relay(res, answer) {
  const headers = { ...answer.headers };
  delete headers.connection;
  delete headers["keep-alive"];
  delete headers["transfer-encoding"];
  headers["content-length"] = answer.body.length;
  res.writeHead(answer.code, headers);
  res.end(answer.body);
}

function own(req, res, body, path) {
  if (path === "/_proxy/faults") {
    if (req.method === "POST") {
      let f;
      try {
        f = JSON.parse(body.toString() || "{}");
      } catch (e) {
        return sendJson(res, 400, status(400, "BadRequest", `not JSON: ${e.message}`));
      }
      if (f === null || typeof f !== "object" || Array.isArray(f)) {
        return sendJson(res, 400, status(400, "BadRequest", "a fault is a JSON object"));
      }
      fault = Object.keys(f).length ? f : null;
    } else if (req.method === "DELETE") {
      fault = null;
    }
    return sendJson(res, 200, { fault });
  }
  if (path === "/_proxy/inflight") return sendJson(res, 200, { inflight });
  if (path === "/_proxy/stats") {
    if (req.method === "DELETE") {
      stats = {};
      warnings = [];
    }
    return sendJson(res, 200, { ...stats, warnings });
  }
  return sendJson(res, 404, status(404, "NotFound", `no proxy path ${path}`));
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function serve(req, res, body) {
  const path = req.url;
  if (path.startsWith("/_proxy/admin/")) {
    const answer = await forward(req, body, path.slice("/_proxy/admin".length), true);
    return relay(res, answer);
  }
  if (path.startsWith("/_proxy/")) return own(req, res, body, path.split("?")[0]);

  const f = takeFault(req);
  if (f && f.delayMs) await sleep(f.delayMs);
  let answer;
  if (!f || f.after || (f.delayMs && !f.status && !f.garbage && !f.drop)) {
    answer = await forward(req, body, path, false);
  }
  if (f && f.drop) {
    count(req.method, path, "dropped");
    return req.socket.destroy();
  }
  if (f && f.status) {
    count(req.method, path, f.status);
    return sendJson(res, f.status, status(f.status, "InternalError", f.message || `an injected fault: HTTP ${f.status}`));
  }
  if (f && f.garbage) {
    count(req.method, path, "garbage");
    res.writeHead(200, { "content-type": "application/json" });
    return res.end("{not json");
  }
  count(req.method, path, answer.code);
  if (answer.headers.warning && warnings.length < 100) {
    warnings.push(`${req.method} ${path}: ${answer.headers.warning}`);
  }
  return relay(res, answer);
}

const server = http.createServer((req, res) => {
  const chunks = [];
  req.on("data", (c) => chunks.push(c));
  req.on("end", () => {
    const counted = !req.url.startsWith("/_proxy/");
    if (counted) inflight++;
    serve(req, res, Buffer.concat(chunks))
      .catch((e) => {
        if (!res.headersSent) sendJson(res, 502, status(502, "BadGateway", `api_proxy: ${e.message}`));
      })
      .finally(() => {
        if (counted) inflight--;
      });
  });
});
server.keepAliveTimeout = 60000;
server.listen(0, "127.0.0.1", () => {
  fs.writeFileSync(`${portFile}.tmp`, `${server.address().port}\n`);
  fs.renameSync(`${portFile}.tmp`, portFile);
});
process.on("SIGTERM", () => process.exit(0));
