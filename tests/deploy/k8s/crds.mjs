// SPDX-License-Identifier: Apache-2.0
// The custom resources that ibcni's manifests use, checked like the API server and the resource's
// own webhook would:
//   k8s.cni.cncf.io/v1 NetworkAttachmentDefinition  the schema of the Network Plumbing Working
//       Group's CRD (spec.config: string), plus what Multus needs of spec.config: a JSON CNI
//       network configuration (cniVersion, and type, or plugins each with a type)
//   nv-ipam.nvidia.com/v1alpha1 IPPool  the schema of nv-ipam's CRD (subnet, perNodeBlockSize,
//       gateway, exclusions, routes, defaultGateway, nodeSelector), plus the checks of its
//       validating webhook (CNI network name, CIDR subnet, block size, gateway in the subnet)
// Unknown fields are errors (a structural CRD schema prunes them silently).
import { isIP } from "node:net";
import Ajv from "ajv";
import { LabelSelector } from "@kubernetes-models/apimachinery/apis/meta/v1/LabelSelector";
import { ObjectMeta } from "@kubernetes-models/apimachinery/apis/meta/v1/ObjectMeta";
import { NodeSelector } from "kubernetes-models/v1/NodeSelector";
import { pointer, validateModel } from "./strict.mjs";

const ajv = new Ajv({ allErrors: true, strict: true });

const nadSchema = {
  type: "object",
  additionalProperties: false,
  required: ["apiVersion", "kind", "metadata"],
  properties: {
    apiVersion: { const: "k8s.cni.cncf.io/v1" },
    kind: { const: "NetworkAttachmentDefinition" },
    metadata: { type: "object" },
    spec: {
      type: "object",
      additionalProperties: false,
      properties: {
        // A JSON-formatted CNI configuration (a network configuration or a conflist).
        config: { type: "string" },
      },
    },
  },
};

const ipPoolSchema = {
  type: "object",
  additionalProperties: false,
  required: ["apiVersion", "kind", "metadata", "spec"],
  properties: {
    apiVersion: { const: "nv-ipam.nvidia.com/v1alpha1" },
    kind: { const: "IPPool" },
    metadata: { type: "object" },
    spec: {
      type: "object",
      additionalProperties: false,
      required: ["subnet", "perNodeBlockSize"],
      properties: {
        subnet: { type: "string" },
        perNodeBlockSize: { type: "integer" },
        gateway: { type: "string" },
        defaultGateway: { type: "boolean" },
        exclusions: {
          type: "array",
          items: {
            type: "object",
            additionalProperties: false,
            required: ["startIP", "endIP"],
            properties: { startIP: { type: "string" }, endIP: { type: "string" } },
          },
        },
        routes: {
          type: "array",
          items: {
            type: "object",
            additionalProperties: false,
            required: ["dst"],
            properties: { dst: { type: "string" } },
          },
        },
        // core/v1 NodeSelector: checked with kubernetes-models below.
        nodeSelector: { type: "object" },
      },
    },
    status: { type: "object" },
  },
};

// Prometheus durations and label names, as the Prometheus Operator's CRDs type them.
const duration = { type: "string", pattern: "^(0|(([0-9]+)y)?(([0-9]+)w)?(([0-9]+)d)?(([0-9]+)h)?(([0-9]+)m)?(([0-9]+)s)?(([0-9]+)ms)?)$" };
const labelName = { type: "string", pattern: "^[a-zA-Z_][a-zA-Z0-9_]*$" };
const relabelActions = ["replace", "keep", "drop", "hashmod", "labelmap", "labeldrop", "labelkeep", "lowercase",
  "uppercase", "keepequal", "dropequal"];
const relabelConfigs = {
  type: "array",
  items: {
    type: "object",
    additionalProperties: false,
    properties: {
      sourceLabels: { type: "array", items: labelName },
      separator: { type: "string" },
      targetLabel: { type: "string" },
      regex: { type: "string" },
      modulus: { type: "integer", minimum: 0 },
      replacement: { type: "string" },
      action: { enum: [...relabelActions, ...relabelActions.map((a) => a.replace(/^./, (c) => c.toUpperCase()))] },
    },
  },
};
const podMonitorSchema = {
  type: "object",
  additionalProperties: false,
  required: ["apiVersion", "kind", "metadata", "spec"],
  properties: {
    apiVersion: { const: "monitoring.coreos.com/v1" },
    kind: { const: "PodMonitor" },
    metadata: { type: "object" },
    spec: {
      type: "object",
      additionalProperties: false,
      required: ["selector"],
      properties: {
        jobLabel: { type: "string" },
        podTargetLabels: { type: "array", items: { type: "string" } },
        // meta/v1 LabelSelector: checked with kubernetes-models below.
        selector: { type: "object" },
        namespaceSelector: {
          type: "object",
          additionalProperties: false,
          properties: { any: { type: "boolean" }, matchNames: { type: "array", items: { type: "string" } } },
        },
        sampleLimit: { type: "integer", minimum: 0 },
        targetLimit: { type: "integer", minimum: 0 },
        labelLimit: { type: "integer", minimum: 0 },
        attachMetadata: { type: "object", additionalProperties: false, properties: { node: { type: "boolean" } } },
        podMetricsEndpoints: {
          type: "array",
          items: {
            type: "object",
            additionalProperties: false,
            properties: {
              port: { type: "string", minLength: 1 },
              portNumber: { type: "integer", minimum: 1, maximum: 65535 },
              path: { type: "string" },
              scheme: { enum: ["http", "https", "HTTP", "HTTPS"] },
              params: { type: "object" },
              interval: duration,
              scrapeTimeout: duration,
              honorLabels: { type: "boolean" },
              honorTimestamps: { type: "boolean" },
              filterRunning: { type: "boolean" },
              followRedirects: { type: "boolean" },
              enableHttp2: { type: "boolean" },
              proxyUrl: { type: "string" },
              tlsConfig: { type: "object" },
              basicAuth: { type: "object" },
              bearerTokenSecret: { type: "object" },
              authorization: { type: "object" },
              oauth2: { type: "object" },
              relabelings: relabelConfigs,
              metricRelabelings: relabelConfigs,
            },
          },
        },
      },
    },
  },
};

const validators = {
  "k8s.cni.cncf.io/v1/NetworkAttachmentDefinition": {
    schema: ajv.compile(nadSchema),
    extra: checkNad,
  },
  "nv-ipam.nvidia.com/v1alpha1/IPPool": {
    schema: ajv.compile(ipPoolSchema),
    extra: checkIpPool,
  },
  "monitoring.coreos.com/v1/PodMonitor": {
    schema: ajv.compile(podMonitorSchema),
    extra: checkPodMonitor,
  },
};

// The custom resource checker for apiVersion/kind, or undefined.
export function customResource(apiVersion, kind) {
  const v = validators[`${apiVersion}/${kind}`];
  return v && ((obj) => checkCustom(v, obj));
}

function checkCustom(v, obj) {
  const problems = [];
  if (!v.schema(obj)) {
    for (const e of v.schema.errors) {
      if (e.keyword === "additionalProperties") {
        problems.push({ path: `${e.instancePath}/${pointer(e.params.additionalProperty)}`, message: "unknown field" });
      } else if (e.keyword === "required") {
        problems.push({ path: `${e.instancePath}/${pointer(e.params.missingProperty)}`, message: "required field missing" });
      } else {
        problems.push({ path: e.instancePath, message: e.message });
      }
    }
  }
  if (obj.metadata && typeof obj.metadata === "object" && !Array.isArray(obj.metadata)) {
    problems.push(...validateModel(ObjectMeta, obj.metadata, "/metadata"));
  }
  problems.push(...v.extra(obj));
  return problems;
}

// CNI network names (libcni's ValidateNetworkName).
const cniNameRe = /^[a-zA-Z0-9][a-zA-Z0-9_.-]*$/;
const cniVersions = ["0.1.0", "0.2.0", "0.3.0", "0.3.1", "0.4.0", "1.0.0", "1.1.0"];

function checkNad(obj) {
  const config = obj.spec?.config;
  if (typeof config !== "string") return [];
  const at = (p) => `/spec/config#${p}`;
  let conf;
  try {
    conf = JSON.parse(config);
  } catch (err) {
    return [{ path: "/spec/config", message: `not JSON: ${err.message}` }];
  }
  if (conf === null || typeof conf !== "object" || Array.isArray(conf)) {
    return [{ path: "/spec/config", message: "not a JSON object" }];
  }
  const problems = [];
  if (typeof conf.cniVersion !== "string") {
    problems.push({ path: at("/cniVersion"), message: "required, a string" });
  } else if (!cniVersions.includes(conf.cniVersion)) {
    problems.push({ path: at("/cniVersion"), message: `unknown CNI version (${cniVersions.join(", ")})` });
  }
  // Multus sets the name from the NetworkAttachmentDefinition when it is missing.
  if (conf.name !== undefined && (typeof conf.name !== "string" || !cniNameRe.test(conf.name))) {
    problems.push({ path: at("/name"), message: "not a CNI network name (letters, digits, _ . -)" });
  }
  if (conf.plugins !== undefined) {
    if (!Array.isArray(conf.plugins) || conf.plugins.length === 0) {
      problems.push({ path: at("/plugins"), message: "must be a non-empty array of plugin configurations" });
    } else {
      conf.plugins.forEach((p, i) => {
        if (p === null || typeof p !== "object" || Array.isArray(p)) {
          problems.push({ path: at(`/plugins/${i}`), message: "must be an object" });
        } else if (typeof p.type !== "string" || p.type === "") {
          problems.push({ path: at(`/plugins/${i}/type`), message: "required, a non-empty string" });
        }
      });
    }
    if (conf.type !== undefined) {
      problems.push({ path: at("/type"), message: "a conflist has no top-level type (it belongs in plugins)" });
    }
  } else if (typeof conf.type !== "string" || conf.type === "") {
    problems.push({ path: at("/type"), message: "required, a non-empty string" });
  }
  return problems;
}

// An IP address as [family, BigInt], or undefined.
function parseIp(text) {
  const family = typeof text === "string" ? isIP(text) : 0;
  if (family === 4) {
    return [4, text.split(".").reduce((n, o) => (n << 8n) | BigInt(o), 0n)];
  }
  if (family === 6) {
    let s = text.replace(/%.*$/, "");
    const v4 = s.match(/(\d+\.\d+\.\d+\.\d+)$/);
    if (v4) {
      const n = parseIp(v4[1])[1];
      s = s.slice(0, -v4[1].length) + `${(n >> 16n).toString(16)}:${(n & 0xffffn).toString(16)}`;
    }
    const [head, tail] = s.includes("::") ? s.split("::") : [s, undefined];
    const h = head ? head.split(":") : [];
    const t = tail ? tail.split(":") : [];
    const groups = tail === undefined ? h : [...h, ...Array(8 - h.length - t.length).fill("0"), ...t];
    return [6, groups.reduce((n, g) => (n << 16n) | BigInt(parseInt(g, 16)), 0n)];
  }
  return undefined;
}

// A CIDR as {family, bits, first, last}, or undefined (net.ParseCIDR's rules: host bits may be set).
function parseCidr(text) {
  const m = typeof text === "string" && text.match(/^([^/]+)\/(\d{1,3})$/);
  const ip = m && parseIp(m[1]);
  if (!ip) return undefined;
  const width = ip[0] === 4 ? 32 : 128;
  const prefix = Number(m[2]);
  if (prefix > width) return undefined;
  const hostBits = BigInt(width - prefix);
  const first = (ip[1] >> hostBits) << hostBits;
  return { family: ip[0], hostBits, first, last: first + (1n << hostBits) - 1n };
}

function checkIpPool(obj) {
  const problems = [];
  const name = obj.metadata?.name;
  if (typeof name === "string" && !cniNameRe.test(name)) {
    problems.push({ path: "/metadata/name", message: "an IP pool name must be a CNI network name" });
  }
  const spec = obj.spec;
  if (!spec || typeof spec !== "object") return problems;
  const net = parseCidr(spec.subnet);
  if (typeof spec.subnet === "string" && !net) {
    problems.push({ path: "/spec/subnet", message: `'${spec.subnet}' is not a CIDR subnet` });
  }
  const block = spec.perNodeBlockSize;
  if (Number.isInteger(block)) {
    if (block < 2) {
      problems.push({ path: "/spec/perNodeBlockSize", message: "must be at least 2" });
    } else if (net && (1n << net.hostBits) - 2n < BigInt(block)) {
      problems.push({ path: "/spec/perNodeBlockSize", message: "is larger than the number of addresses in the subnet" });
    }
  }
  const inSubnet = (text, path) => {
    if (typeof text !== "string") return;
    const ip = parseIp(text);
    if (!ip) {
      problems.push({ path, message: `'${text}' is not an IP address` });
    } else if (net && (ip[0] !== net.family || ip[1] < net.first || ip[1] > net.last)) {
      problems.push({ path, message: `${text} is not in the subnet ${spec.subnet}` });
    }
  };
  inSubnet(spec.gateway, "/spec/gateway");
  if (Array.isArray(spec.exclusions)) {
    spec.exclusions.forEach((e, i) => {
      inSubnet(e?.startIP, `/spec/exclusions/${i}/startIP`);
      inSubnet(e?.endIP, `/spec/exclusions/${i}/endIP`);
    });
  }
  if (Array.isArray(spec.routes)) {
    spec.routes.forEach((r, i) => {
      if (typeof r?.dst === "string" && !parseCidr(r.dst)) {
        problems.push({ path: `/spec/routes/${i}/dst`, message: `'${r.dst}' is not a CIDR` });
      }
    });
  }
  if (spec.nodeSelector && typeof spec.nodeSelector === "object" && !Array.isArray(spec.nodeSelector)) {
    problems.push(...validateModel(NodeSelector, spec.nodeSelector, "/spec/nodeSelector"));
  }
  return problems;
}

function checkPodMonitor(obj) {
  const selector = obj.spec?.selector;
  if (!selector || typeof selector !== "object" || Array.isArray(selector)) return [];
  return validateModel(LabelSelector, selector, "/spec/selector");
}
