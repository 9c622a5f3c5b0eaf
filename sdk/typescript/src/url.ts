/**
 * Building request URLs from the operation table: path parameters and
 * query strings, percent-encoded like the Rust client does (everything but
 * RFC 3986's unreserved characters), so `@revenue` is `%40revenue` and a
 * space is `%20`, never `+`.
 */

/** Percent-encodes everything but `A–Z a–z 0–9 - . _ ~` (UTF-8). */
export function encodeComponent(text: string): string {
  return encodeURIComponent(text).replace(
    /[!'()*]/g,
    (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`,
  );
}

/** A query value as the client sends it. */
export type QueryValue = string | number | boolean | undefined | null;

/**
 * `/v1/holds/{hold_id}` with `{hold_id: "h 1"}` → `/v1/holds/h%201`.
 * Every `{name}` of the template must be given, as a non-empty string.
 */
export function fillPath(template: string, params: Readonly<Record<string, string>>): string {
  return template.replace(/\{([^}]+)\}/g, (_, name: string) => {
    const value = params[name];
    if (typeof value !== "string" || value === "") {
      throw new TypeError(`path parameter ${name} must be a non-empty string, got ${describe(value)}`);
    }
    return encodeComponent(value);
  });
}

/**
 * The query string (with its `?`, or empty) of the parameters that are set.
 * Only `allowed` names may appear: the server refuses unknown parameters
 * with 422, and a typo should fail here, before any request.
 */
export function queryString(
  query: Readonly<Record<string, QueryValue>> | undefined,
  allowed: readonly string[],
): string {
  if (query === undefined) return "";
  const parts: string[] = [];
  for (const [name, value] of Object.entries(query)) {
    if (!allowed.includes(name)) {
      throw new TypeError(`unknown query parameter ${JSON.stringify(name)}; this operation takes ${allowed.join(", ") || "none"}`);
    }
    if (value === undefined || value === null) continue;
    if (typeof value === "number" && !Number.isFinite(value)) {
      throw new TypeError(`query parameter ${name} must be finite, got ${value}`);
    }
    parts.push(`${encodeComponent(name)}=${encodeComponent(String(value))}`);
  }
  return parts.length === 0 ? "" : `?${parts.join("&")}`;
}

export function describe(value: unknown): string {
  if (typeof value === "string") return JSON.stringify(value);
  if (value === null) return "null";
  return typeof value === "object" ? "an object" : `${typeof value} ${String(value)}`;
}
