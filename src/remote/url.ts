// Internal: not exported from the package entry.
// Remote paths: `s3://bucket/key` (object storage through the S3 API: AWS, GCS's S3 interop, R2,
// MinIO, Ceph, Swift) and `http(s)://host/path` (any server that answers ranged GETs). The rule: a
// path is remote exactly when it starts with one of these schemes; everything else is a local path.

import { invalidOption } from '../errors.js';

export type RemoteUrl =
  | { readonly kind: 's3'; readonly url: string; readonly bucket: string; readonly key: string }
  | { readonly kind: 'http'; readonly url: string };

const REMOTE = /^(s3|https?):\/\//i;

export function isRemote(path: unknown): path is string {
  return typeof path === 'string' && REMOTE.test(path);
}

/** Parse a remote path, or refuse it (`ERR_INVALID_OPTION`) naming what is wrong with it. */
export function parseRemote(url: string, knob = 'path'): RemoteUrl {
  if (/^s3:\/\//i.test(url)) {
    const rest = url.slice('s3://'.length);
    const slash = rest.indexOf('/');
    const bucket = slash < 0 ? rest : rest.slice(0, slash);
    const key = slash < 0 ? '' : rest.slice(slash + 1);
    if (!/^[a-z0-9][a-z0-9.\-_]{1,254}$/i.test(bucket)) throw invalidOption(knob, 's3://BUCKET/KEY with a bucket name', url);
    checkKey(key, url, knob);
    return { kind: 's3', url: `s3://${bucket}/${key}`, bucket, key };
  }
  if (/^https?:\/\//i.test(url)) {
    let u: URL;
    try {
      u = new URL(url);
    } catch {
      throw invalidOption(knob, 'a valid http(s) URL', url);
    }
    checkKey(decodeURIComponent(u.pathname.replace(/^\//, '')), url, knob);
    return { kind: 'http', url: u.href };
  }
  throw invalidOption(knob, 'an s3:// or http(s):// URL', url);
}

/** A key maps to a path in the node cache: no `..` or empty segments, which would leave its folder. */
function checkKey(key: string, url: string, knob: string): void {
  if (key.split('/').some((s, i, all) => s === '..' || s === '.' || (s === '' && i < all.length - 1))) {
    throw invalidOption(knob, 'a key without "." / ".." segments or "//"', url, 'Name the object by its plain key');
  }
}

/** The folder part of a remote URL, up to and including its last `/`. */
export function remoteDir(url: string): string {
  return url.slice(0, url.lastIndexOf('/') + 1);
}
