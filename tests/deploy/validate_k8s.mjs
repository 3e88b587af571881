// Validates Kubernetes objects offline against the OpenAPI schemas shipped by the npm
// package kubernetes-models (installed, at the version tests/deploy/test_kubernetes.py pins,
// in the node_modules directory given as argv[2]).
// The schemas' validators accept unknown fields (a misspelt one would pass), so every field is
// also looked up in the package's type declarations (.d.ts: one interface per object type).
// Input: a JSON array of objects on stdin. Output: one line per object, "OK kind/name",
// "INVALID kind/name: errors" or "NOSCHEMA kind/name (apiVersion)"; exit 1 if any is invalid.
import fs from "node:fs";
import path from "node:path";
import { pathToFileURL } from "node:url";

const modules = process.argv[2];

// A parsed TypeScript type: {kind: "object", fields: {name: type}}, {kind: "array", of},
// {kind: "map", of}, {kind: "ref", name} (an imported interface) or {kind: "leaf"}.
function parseTypes(text) {
  text = text.replace(/\/\*[\s\S]*?\*\//g, "").replace(/\/\/[^\n]*/g, "");
  const tokens = text.match(/"(?:[^"\\]|\\.)*"|[A-Za-z_$][\w$.]*|\d+|[{}<>\[\]:;?|,()=]/g) || [];
  let i = 0;
  const peek = () => tokens[i];
  const next = () => tokens[i++];
  function primary() {
    const t = next();
    if (t === "Array" && peek() === "<") {
      next();
      const of = type();
      next();  // >
      return { kind: "array", of };
    }
    if (t === "{") {
      if (peek() === "[") {  // { [key: string]: T; }
        while (next() !== "]");
        next();  // :
        const of = type();
        if (peek() === ";") next();
        next();  // }
        return { kind: "map", of };
      }
      const fields = {};
      while (peek() !== "}") {
        const name = next().replace(/^"|"$/g, "");
        if (peek() === "?") next();
        next();  // :
        fields[name] = type();
        if (peek() === ";" || peek() === ",") next();
      }
      next();  // }
      return { kind: "object", fields };
    }
    if (/^[A-Z]\w*$/.test(t) && t.startsWith("I")) return { kind: "ref", name: t };
    return { kind: "leaf" };
  }
  function type() {
    let t = primary();
    while (peek() === "|") {
      next();
      const u = primary();
      if (t.kind === "leaf") t = u;
    }
    return t;
  }
  // The first interface: "export interface IName [extends A, B] { fields }".
  const at = tokens.findIndex((t, k) => t === "interface" && tokens[k - 1] === "export");
  if (at < 0) return null;
  i = at + 2;
  let typeMeta = false;
  while (peek() !== "{") typeMeta = next() === "TypeMeta" || typeMeta;
  const body = primary();
  if (typeMeta) body.fields.apiVersion = body.fields.kind = { kind: "leaf" };
  return body;
}

// file (.d.ts) -> its interface and the files its names are imported from.
const declarations = new Map();
function declaration(file) {
  if (declarations.has(file)) return declarations.get(file);
  const text = fs.readFileSync(file, "utf8");
  const imports = {};
  for (const m of text.matchAll(/import \{ (\w+) \} from "([^"]+)";/g)) {
    imports[m[1]] = m[2].startsWith(".")
      ? path.resolve(path.dirname(file), m[2].replace(/\.js$/, ".d.ts"))
      : path.join(modules, m[2] + ".d.ts");
  }
  const d = { type: parseTypes(text), imports };
  declarations.set(file, d);
  return d;
}

// Pushes the JSON paths of `value`'s fields that `type` (declared in `file`) does not have.
function unknownFields(value, type, file, where, out) {
  if (!type || value === null || typeof value !== "object") return;
  if (type.kind === "array" && Array.isArray(value)) {
    value.forEach((v, k) => unknownFields(v, type.of, file, `${where}/${k}`, out));
  } else if (type.kind === "map") {
    for (const [k, v] of Object.entries(value)) unknownFields(v, type.of, file, `${where}/${k}`, out);
  } else if (type.kind === "object") {
    for (const [k, v] of Object.entries(value)) {
      if (!(k in type.fields)) out.push(`${where}/${k}: unknown field`);
      else unknownFields(v, type.fields[k], file, `${where}/${k}`, out);
    }
  } else if (type.kind === "ref") {
    const from = declaration(file).imports[type.name];
    if (from && fs.existsSync(from)) checkObject(value, from, where, out);
  }
}

function checkObject(value, file, where, out) {
  const d = declaration(file);
  if (d.type) unknownFields(value, d.type, file, where, out);  // else an alias (IntOrString)
}
const objects = JSON.parse(fs.readFileSync(0, "utf8"));
let bad = 0;
for (const obj of objects) {
  const what = `${obj.kind}/${obj.metadata && obj.metadata.name}`;
  const parts = obj.apiVersion.split("/");
  const file = path.join(modules, "kubernetes-models", ...parts, `${obj.kind}.js`);
  if (!fs.existsSync(file)) {
    console.log(`NOSCHEMA ${what} (${obj.apiVersion})`);
    continue;
  }
  const Model = (await import(pathToFileURL(file)))[obj.kind];
  try {
    new Model(obj).validate();
    const unknown = [];
    checkObject(obj, file.replace(/\.js$/, ".d.ts"), "", unknown);
    if (unknown.length) throw new Error(unknown.join("; "));
    console.log(`OK ${what}`);
  } catch (e) {
    bad++;
    console.log(`INVALID ${what}: ${String(e.message).replace(/\n/g, " ")}`);
  }
}
process.exit(bad ? 1 : 0);
