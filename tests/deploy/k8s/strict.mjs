// SPDX-License-Identifier: Apache-2.0
// Validation of a value against one kubernetes-models type, made strict.
//
// kubernetes-models ships each Kubernetes OpenAPI definition compiled into an ajv validator. It
// checks types, required properties, enums and formats (quantity, int-or-string), but the
// OpenAPI definitions do not say "additionalProperties: false", so an unknown field (a typo such
// as nodeSelecter) passes, while the API server drops it (or, with strict field validation,
// refuses it). The compiled validators no longer carry the schema to walk, so this module learns
// which properties a definition has from the validator itself: it hands the validator a copy of
// the value in which every object is a Proxy that records the property names read. A generated
// validator reads every property its definition defines (`data.name === undefined || ...`) and
// enumerates the keys of maps (labels, resources.limits), so after it ran:
//   - an object whose keys were enumerated is a map: any key is allowed;
//   - an object of which some properties were read has a definition: a key never read is not
//     in it, and is reported as "unknown field" (what kubeconform -strict does);
//   - an object of which nothing was read is free-form (x-kubernetes-preserve-unknown-fields,
//     RawExtension) or below a field already reported: left alone.
// The package's generator drops every property named "description" (PriorityClass, and in a
// CRD: JSONSchemaProps, ExternalDocumentation, CustomResourceColumnDefinition) and JSONSchemaProps'
// x-kubernetes-* properties from the compiled validators (found by comparing kubernetes-models
// 4.5.1's .d.ts declarations with what its validators read): those keys are not checked at all.

// The JSON pointer escape of one path segment.
const unseenByValidators = (key) => key === "description" || key.startsWith("x-kubernetes-");

export function pointer(segment) {
  return String(segment).replace(/~/g, "~0").replace(/\//g, "~1");
}

function instrument(value, path, records) {
  if (Array.isArray(value)) {
    return value.map((item, i) => instrument(item, `${path}/${i}`, records));
  }
  if (value === null || typeof value !== "object") {
    return value;
  }
  const record = { path, keys: Object.keys(value), read: new Set(), enumerated: false };
  const target = {};
  for (const key of record.keys) {
    // defineProperty, not assignment: a key "__proto__" stays a plain property.
    Object.defineProperty(target, key, {
      value: instrument(value[key], `${path}/${pointer(key)}`, records),
      enumerable: true,
      writable: true,
      configurable: true,
    });
  }
  records.push(record);
  return new Proxy(target, {
    get(t, key, receiver) {
      if (typeof key === "string") record.read.add(key);
      return Reflect.get(t, key, receiver);
    },
    has(t, key) {
      if (typeof key === "string") record.read.add(key);
      return Reflect.has(t, key);
    },
    ownKeys(t) {
      record.enumerated = true;
      return Reflect.ownKeys(t);
    },
  });
}

// validateModel(Model, value, base): the problems of value as an instance of the kubernetes-models
// class Model (e.g. DaemonSet, ObjectMeta, NodeSelector), as [{path, message}], paths being JSON
// pointers prefixed with base. [] when valid.
export function validateModel(Model, value, base = "") {
  const records = [];
  const proxy = instrument(value, base, records);
  const problems = [];
  try {
    // The model's validate() runs the compiled validator on `this`; calling it on the proxy
    // (instead of `new Model(value)`, which copies the value) lets the proxy see every read.
    Model.prototype.validate.call(proxy);
  } catch (err) {
    if (!Array.isArray(err.errors)) throw err;
    for (const e of err.errors) {
      let path = base + e.instancePath;
      let message = e.message || e.keyword;
      if (e.keyword === "required") {
        path += `/${pointer(e.params.missingProperty)}`;
        message = "required field missing";
      } else if (e.keyword === "enum") {
        message += `: ${e.params.allowedValues.join(", ")}`;
      }
      problems.push({ path, message });
    }
  }
  for (const record of records) {
    if (record.enumerated || record.read.size === 0) continue;
    for (const key of record.keys) {
      if (!record.read.has(key) && !unseenByValidators(key)) {
        problems.push({ path: `${record.path}/${pointer(key)}`, message: "unknown field" });
      }
    }
  }
  return problems;
}
