// Internal: not exported from the package entry.
// The two kinds of remote store behind one small interface: what an object is (size, ETag), its
// bytes from an offset (a ranged GET), and the objects under a prefix (S3's paged listing). The rule:
// signing, credentials, endpoints and region discovery are the AWS SDK's (@aws-sdk/client-s3: the
// standard credential chain — environment, shared config/credentials files and profiles, web identity
// tokens, container and instance metadata — and AWS_ENDPOINT_URL_S3 / AWS_ENDPOINT_URL); retries are
// ours (retry.ts), so the SDK makes one attempt per call.

import type { S3Client, S3ClientConfig } from '@aws-sdk/client-s3';
import { Readable } from 'node:stream';
import { LoaderError } from '../errors.js';
import type { RemoteUrl } from './url.js';

export interface ObjectInfo {
  readonly url: string;
  readonly size: number;
  /** The store's entity tag, quotes removed; absent when the server sends none. */
  readonly etag?: string;
}

/** How to reach S3-compatible storage; each falls back to the AWS SDK's own configuration. */
export interface S3Options {
  /** e.g. `http://127.0.0.1:9000` (MinIO, Swift, R2's account endpoint). Default: AWS_ENDPOINT_URL_S3, AWS_ENDPOINT_URL, the profile's endpoint_url, else AWS. */
  readonly endpoint?: string;
  /** Default: AWS_REGION / AWS_DEFAULT_REGION / the profile's, else `us-east-1`; a bucket elsewhere is followed by its redirect. */
  readonly region?: string;
  /** 'path' (`endpoint/bucket/key`) or 'virtual' (`bucket.endpoint/key`). Default: 'path' with a custom endpoint, else 'virtual'. */
  readonly addressing?: 'path' | 'virtual';
  /** A shared config profile (default AWS_PROFILE, else `default`). */
  readonly profile?: string;
  /** Fixed credentials instead of the chain (tests, or keys from elsewhere). */
  readonly credentials?: { readonly accessKeyId: string; readonly secretAccessKey: string; readonly sessionToken?: string };
}

export interface ObjectStore {
  stat(url: RemoteUrl, signal?: AbortSignal): Promise<ObjectInfo>;
  /** The object's bytes from `offset` to its end, as chunks; `etag` makes the read fail if the object changed. */
  read(url: RemoteUrl, offset: number, etag: string | undefined, signal?: AbortSignal): Promise<AsyncIterable<Uint8Array>>;
  /** Every object whose key starts with the prefix, in key order. */
  list(prefix: RemoteUrl, signal?: AbortSignal): Promise<ObjectInfo[]>;
  /** Write a small object whole (a dataset's manifest beside its data). */
  put(url: RemoteUrl, body: Uint8Array, signal?: AbortSignal): Promise<void>;
}

/** An HTTP answer that was not what was asked for: `status` and the store's error code classify it (retry.ts). */
export class StoreError extends Error {
  override name = 'StoreError';
  constructor(message: string, readonly status: number | undefined, readonly code: string | undefined, options?: ErrorOptions) {
    super(message, options);
  }
}

const unquote = (etag: string | undefined | null) => (etag == null ? undefined : etag.replace(/^W\//, '').replace(/^"|"$/g, ''));

/** The SDK, loaded at the first S3 request (a third of a second a process start would pay for nothing). */
type Sdk = typeof import('@aws-sdk/client-s3');

export class S3Store implements ObjectStore {
  readonly #client: Promise<S3Client>;
  #sdk: Sdk | undefined;
  readonly #endpoint: string | undefined;

  constructor(options: S3Options = {}) {
    const endpoint = options.endpoint ?? process.env.AWS_ENDPOINT_URL_S3 ?? process.env.AWS_ENDPOINT_URL;
    this.#endpoint = endpoint;
    const config: S3ClientConfig = {
      ...(endpoint !== undefined ? { endpoint } : {}),
      forcePathStyle: (options.addressing ?? (endpoint !== undefined ? 'path' : 'virtual')) === 'path',
      followRegionRedirects: true,
      maxAttempts: 1,
      // S3-compatible servers other than AWS may not know the newer checksum headers.
      requestChecksumCalculation: 'WHEN_REQUIRED',
      responseChecksumValidation: 'WHEN_REQUIRED',
      ...(options.profile !== undefined ? { profile: options.profile } : {}),
      // A copy: the SDK marks the object it is given (`$source`), and the caller's is the caller's.
      ...(options.credentials !== undefined ? { credentials: { ...options.credentials } } : {}),
    };
    this.#client = (async () => {
      const { S3Client } = (this.#sdk = await import('@aws-sdk/client-s3'));
      const region = options.region ?? process.env.AWS_REGION ?? process.env.AWS_DEFAULT_REGION;
      if (region !== undefined) return new S3Client({ ...config, region });
      // The profile's region when it has one; else us-east-1, from which a bucket elsewhere redirects.
      const probe = new S3Client(config);
      try {
        await probe.config.region();
        return probe;
      } catch {
        probe.destroy();
        return new S3Client({ ...config, region: 'us-east-1' });
      }
    })();
  }

  /** Where requests go, for messages. */
  get where(): string {
    return this.#endpoint ?? 'AWS S3';
  }

  async stat(url: RemoteUrl, signal?: AbortSignal): Promise<ObjectInfo> {
    const u = s3(url);
    const client = await this.#client;
    try {
      const r = await client.send(new this.#sdk!.HeadObjectCommand({ Bucket: u.bucket, Key: u.key }), { abortSignal: signal });
      return { url: u.url, size: Number(r.ContentLength ?? 0), ...(r.ETag ? { etag: unquote(r.ETag)! } : {}) };
    } catch (error) {
      throw fromSdk(error, `HEAD ${u.url}`);
    }
  }

  async read(url: RemoteUrl, offset: number, etag: string | undefined, signal?: AbortSignal): Promise<AsyncIterable<Uint8Array>> {
    const u = s3(url);
    const client = await this.#client;
    try {
      const r = await client.send(
        new this.#sdk!.GetObjectCommand({ Bucket: u.bucket, Key: u.key, ...(offset > 0 ? { Range: `bytes=${offset}-` } : {}), ...(etag !== undefined ? { IfMatch: `"${etag}"` } : {}) }),
        { abortSignal: signal },
      );
      if (r.Body === undefined) throw new StoreError(`GET ${u.url}: no body`, undefined, 'NoBody');
      return r.Body as Readable;
    } catch (error) {
      throw fromSdk(error, `GET ${u.url}`);
    }
  }

  async list(prefix: RemoteUrl, signal?: AbortSignal): Promise<ObjectInfo[]> {
    const u = s3(prefix);
    const client = await this.#client;
    const out: ObjectInfo[] = [];
    let token: string | undefined;
    do {
      let r;
      try {
        r = await client.send(new this.#sdk!.ListObjectsV2Command({ Bucket: u.bucket, Prefix: u.key, ...(token ? { ContinuationToken: token } : {}) }), { abortSignal: signal });
      } catch (error) {
        throw fromSdk(error, `LIST ${u.url}`);
      }
      for (const o of r.Contents ?? []) {
        if (o.Key === undefined || o.Key.endsWith('/')) continue;
        out.push({ url: `s3://${u.bucket}/${o.Key}`, size: Number(o.Size ?? 0), ...(o.ETag ? { etag: unquote(o.ETag)! } : {}) });
      }
      token = r.IsTruncated ? r.NextContinuationToken : undefined;
    } while (token !== undefined);
    return out.sort((a, b) => (a.url < b.url ? -1 : a.url > b.url ? 1 : 0));
  }

  async put(url: RemoteUrl, body: Uint8Array, signal?: AbortSignal): Promise<void> {
    const u = s3(url);
    const client = await this.#client;
    try {
      await client.send(new this.#sdk!.PutObjectCommand({ Bucket: u.bucket, Key: u.key, Body: body, ContentLength: body.length }), { abortSignal: signal });
    } catch (error) {
      throw fromSdk(error, `PUT ${u.url}`);
    }
  }

  async close(): Promise<void> {
    (await this.#client).destroy();
  }
}

function s3(url: RemoteUrl): Extract<RemoteUrl, { kind: 's3' }> {
  if (url.kind !== 's3') throw new Error(`internal: ${url.url} is not an s3:// URL`);
  return url;
}

/** An SDK failure as a StoreError: the HTTP status and S3's error code (`SlowDown`, `NoSuchKey`), or the socket's. */
function fromSdk(error: unknown, doing: string): StoreError {
  if (error instanceof StoreError || error instanceof LoaderError) return error as StoreError;
  const e = error as { name?: string; code?: string; message?: string; $metadata?: { httpStatusCode?: number }; cause?: { code?: string } };
  const status = e.$metadata?.httpStatusCode;
  const code = e.code ?? e.cause?.code ?? (status !== undefined || e.name !== 'Error' ? e.name : undefined);
  return new StoreError(`${doing}: ${status !== undefined ? `HTTP ${status} ` : ''}${code ?? ''}${e.message && e.message !== code ? ` (${e.message})` : ''}`.trim(), status, code, { cause: error });
}

/** Plain HTTP(S): HEAD for size and ETag, ranged GETs. No listing: name files, or brace patterns that expand to names. */
export class HttpStore implements ObjectStore {
  async stat(url: RemoteUrl, signal?: AbortSignal): Promise<ObjectInfo> {
    const r = await this.#fetch(url.url, { method: 'HEAD', signal }, 'HEAD');
    const size = Number(r.headers.get('content-length'));
    if (!Number.isSafeInteger(size) || size < 0) throw new StoreError(`HEAD ${url.url}: no Content-Length`, r.status, 'NoLength');
    const etag = unquote(r.headers.get('etag'));
    return { url: url.url, size, ...(etag !== undefined ? { etag } : {}) };
  }

  async read(url: RemoteUrl, offset: number, etag: string | undefined, signal?: AbortSignal): Promise<AsyncIterable<Uint8Array>> {
    const headers: Record<string, string> = {};
    if (offset > 0) headers.range = `bytes=${offset}-`;
    if (etag !== undefined) headers['if-match'] = `"${etag}"`;
    const r = await this.#fetch(url.url, { headers, signal }, 'GET');
    if (offset > 0 && r.status !== 206) {
      await r.body?.cancel();
      throw new StoreError(`GET ${url.url} from byte ${offset}: the server answered ${r.status}, not 206 (no range reads)`, r.status, 'NoRange');
    }
    if (r.body === null) throw new StoreError(`GET ${url.url}: no body`, r.status, 'NoBody');
    return Readable.fromWeb(r.body as import('node:stream/web').ReadableStream<Uint8Array>);
  }

  async list(prefix: RemoteUrl): Promise<ObjectInfo[]> {
    throw new LoaderError(
      'ERR_INVALID_OPTION',
      `${prefix.url}: an HTTP server has no listing Stoker can rely on, so a folder or a wildcard cannot be expanded over http(s). Name the files, or a brace pattern that expands to their names ("shard-{000..099}.tar")`,
    );
  }

  async put(url: RemoteUrl): Promise<void> {
    throw new LoaderError('ERR_INVALID_OPTION', `${url.url}: Stoker writes nothing to an http(s) server; keep the manifest in the node cache (the default) or put the data in object storage`);
  }

  async #fetch(url: string, init: RequestInit, doing: string): Promise<Response> {
    let r: Response;
    try {
      r = await fetch(url, init);
    } catch (error) {
      const cause = (error as { cause?: { code?: string; message?: string } }).cause;
      throw new StoreError(`${doing} ${url}: ${cause?.code ?? ''} ${cause?.message ?? (error as Error).message}`.trim(), undefined, cause?.code ?? (error as Error).name, { cause: error });
    }
    if (r.status >= 300) {
      await r.body?.cancel();
      throw new StoreError(`${doing} ${url}: HTTP ${r.status} ${r.statusText}`, r.status, r.status === 404 ? 'NotFound' : r.status === 412 ? 'PreconditionFailed' : undefined);
    }
    return r;
  }
}
