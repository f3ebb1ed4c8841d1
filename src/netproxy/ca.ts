import { createPrivateKey, generateKeyPairSync, randomBytes } from 'node:crypto';
import { chmodSync, existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { isIP } from 'node:net';
import { join } from 'node:path';
import { createSecureContext, rootCertificates, type SecureContext } from 'node:tls';
import forge from 'node-forge';

/** Where the system keeps its roots, first found wins; else Node's own copy of Mozilla's. */
const SYSTEM_BUNDLES = ['/etc/ssl/certs/ca-certificates.crt', '/etc/pki/tls/certs/ca-bundle.crt', '/etc/ssl/ca-bundle.pem', '/etc/ssl/cert.pem'];
/** Leaf certificates made, by host: one per credential host, so a few. */
const MAX_LEAVES = 1000;
const DAY_MS = 86_400_000;

/**
 * The daemon's own certificate authority (SPEC §21): made at its first start under
 * `<state>/ca/` (`ca.pem`, and `ca.key` 0600 in a 0700 directory; the state directory is hidden
 * inside every sandbox), it signs a certificate for each credential host the proxy ends TLS for.
 * The leaves share one key made at each start and are kept in memory only. The keys are made by
 * Node's crypto (native), the certificates built and signed with node-forge.
 */
export class ProxyCa {
  readonly certPem: string;
  private readonly caKey: forge.pki.rsa.PrivateKey;
  private readonly caCert: forge.pki.Certificate;
  private readonly leafKeyPem: string;
  private readonly leafPublic: forge.pki.rsa.PublicKey;
  private readonly leaves = new Map<string, SecureContext>();
  private readonly leafPems = new Map<string, string>();
  private bundle: string | undefined;

  private constructor(certPem: string, keyPem: string) {
    this.certPem = certPem;
    this.caCert = forge.pki.certificateFromPem(certPem);
    this.caKey = forge.pki.privateKeyFromPem(keyPem) as forge.pki.rsa.PrivateKey;
    const leaf = generateKeyPairSync('rsa', { modulusLength: 2048 });
    this.leafKeyPem = leaf.privateKey.export({ type: 'pkcs1', format: 'pem' }).toString();
    this.leafPublic = forge.pki.publicKeyFromPem(leaf.publicKey.export({ type: 'spki', format: 'pem' }).toString()) as forge.pki.rsa.PublicKey;
  }

  /** The CA under `dir` (`<state>/ca`), made there if it is not yet. */
  static open(dir: string): ProxyCa {
    const certFile = join(dir, 'ca.pem');
    const keyFile = join(dir, 'ca.key');
    if (existsSync(certFile) && existsSync(keyFile)) {
      chmodSync(keyFile, 0o600);
      return new ProxyCa(readFileSync(certFile, 'utf8'), readFileSync(keyFile, 'utf8'));
    }
    mkdirSync(dir, { recursive: true, mode: 0o700 });
    chmodSync(dir, 0o700);
    const made = makeCa();
    writeFileSync(keyFile, made.keyPem, { mode: 0o600 });
    chmodSync(keyFile, 0o600);
    writeFileSync(certFile, made.certPem, { mode: 0o644 });
    return new ProxyCa(made.certPem, made.keyPem);
  }

  /** The TLS context the proxy answers a job with for `host`: a certificate for it, signed by this CA. */
  contextFor(host: string): SecureContext {
    const name = host.toLowerCase();
    let ctx = this.leaves.get(name);
    if (!ctx) {
      if (this.leaves.size >= MAX_LEAVES) this.leaves.clear();
      ctx = createSecureContext(this.leafFor(name));
      this.leaves.set(name, ctx);
    }
    return ctx;
  }

  /** The same as PEM (the leaf's key, and its certificate followed by this CA's), for the proxy's TLS thread to make its context of. */
  leafFor(host: string): { key: string; cert: string } {
    const name = host.toLowerCase();
    let cert = this.leafPems.get(name);
    if (cert === undefined) {
      if (this.leafPems.size >= MAX_LEAVES) this.leafPems.clear();
      cert = `${this.leaf(name)}${this.certPem}`;
      this.leafPems.set(name, cert);
    }
    return { key: this.leafKeyPem, cert };
  }

  /** What jobs trust (SSL_CERT_FILE and the rest): the system's roots, then this CA. */
  trustBundle(): string {
    this.bundle ??= `${systemRoots().trimEnd()}\n${this.certPem}`;
    return this.bundle;
  }

  private leaf(host: string): string {
    const cert = forge.pki.createCertificate();
    cert.publicKey = this.leafPublic;
    cert.serialNumber = serial();
    const now = Date.now();
    cert.validity.notBefore = new Date(now - DAY_MS);
    // Under 398 days: clients that cap a leaf's life (Apple's, Chrome's) accept it.
    cert.validity.notAfter = new Date(now + 397 * DAY_MS);
    cert.setSubject([{ name: 'commonName', value: host }]);
    cert.setIssuer(this.caCert.subject.attributes);
    cert.setExtensions([
      { name: 'basicConstraints', cA: false },
      { name: 'keyUsage', digitalSignature: true, keyEncipherment: true },
      { name: 'extKeyUsage', serverAuth: true },
      { name: 'subjectAltName', altNames: [isIP(host) ? { type: 7, ip: host } : { type: 2, value: host }] },
      { name: 'authorityKeyIdentifier', keyIdentifier: this.caCert.generateSubjectKeyIdentifier().getBytes() },
    ]);
    cert.sign(this.caKey, forge.md.sha256.create());
    return forge.pki.certificateToPem(cert);
  }
}

/** A new CA: an RSA key made natively, a self-signed certificate for ten years. */
function makeCa(): { certPem: string; keyPem: string } {
  const pair = generateKeyPairSync('rsa', { modulusLength: 2048 });
  const keyPem = pair.privateKey.export({ type: 'pkcs1', format: 'pem' }).toString();
  const key = forge.pki.privateKeyFromPem(keyPem) as forge.pki.rsa.PrivateKey;
  const cert = forge.pki.createCertificate();
  cert.publicKey = forge.pki.publicKeyFromPem(pair.publicKey.export({ type: 'spki', format: 'pem' }).toString());
  cert.serialNumber = serial();
  const now = Date.now();
  cert.validity.notBefore = new Date(now - DAY_MS);
  cert.validity.notAfter = new Date(now + 3650 * DAY_MS);
  const subject = [
    { name: 'commonName', value: `procctl proxy CA ${randomBytes(4).toString('hex')}` },
    { name: 'organizationName', value: 'procctl (credentials for sandboxed jobs)' },
  ];
  cert.setSubject(subject);
  cert.setIssuer(subject);
  cert.setExtensions([
    { name: 'basicConstraints', cA: true, critical: true, pathLenConstraint: 0 },
    { name: 'keyUsage', keyCertSign: true, cRLSign: true, critical: true },
    { name: 'subjectKeyIdentifier' },
  ]);
  cert.sign(key, forge.md.sha256.create());
  // Checked by Node's own parser before it is kept: a key it cannot load is no use to the proxy.
  createPrivateKey(keyPem);
  return { certPem: forge.pki.certificateToPem(cert), keyPem };
}

/** A positive random serial number, as hex. */
function serial(): string {
  const b = randomBytes(16);
  b[0] &= 0x7f;
  return b.toString('hex');
}

/** The system's trusted roots as PEM: the distribution's bundle, else Node's copy of Mozilla's. */
export function systemRoots(): string {
  for (const file of SYSTEM_BUNDLES) {
    try {
      const text = readFileSync(file, 'utf8');
      if (text.includes('BEGIN CERTIFICATE')) return text;
    } catch {
      // not this distribution's place
    }
  }
  return rootCertificates.join('\n');
}
