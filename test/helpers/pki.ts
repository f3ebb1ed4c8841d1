import forge from 'node-forge';

/** A CA of a test's own (no system trusts it) and a server certificate it signs. */
export interface TestPki {
  caPem: string;
  certPem: string;
  keyPem: string;
}

/**
 * A CA named `caName` and a certificate it signs for the address `ip` (its common name and its
 * subjectAltName), valid from a day ago for thirty days: what a local HTTPS upstream serves.
 */
export function testPki(caName: string, ip = '127.0.0.1'): TestPki {
  const caKeys = forge.pki.rsa.generateKeyPair(1024);
  const ca = forge.pki.createCertificate();
  ca.publicKey = caKeys.publicKey;
  ca.serialNumber = '01';
  ca.validity.notBefore = new Date(Date.now() - 86_400_000);
  ca.validity.notAfter = new Date(Date.now() + 86_400_000 * 30);
  const issuer = [{ name: 'commonName', value: caName }];
  ca.setSubject(issuer);
  ca.setIssuer(issuer);
  ca.setExtensions([{ name: 'basicConstraints', cA: true, critical: true }, { name: 'keyUsage', keyCertSign: true, critical: true }]);
  ca.sign(caKeys.privateKey, forge.md.sha256.create());
  const keys = forge.pki.rsa.generateKeyPair(1024);
  const leaf = forge.pki.createCertificate();
  leaf.publicKey = keys.publicKey;
  leaf.serialNumber = '02';
  leaf.validity.notBefore = ca.validity.notBefore;
  leaf.validity.notAfter = ca.validity.notAfter;
  leaf.setSubject([{ name: 'commonName', value: ip }]);
  leaf.setIssuer(issuer);
  leaf.setExtensions([{ name: 'subjectAltName', altNames: [{ type: 7, ip }] }, { name: 'extKeyUsage', serverAuth: true }]);
  leaf.sign(caKeys.privateKey, forge.md.sha256.create());
  return { caPem: forge.pki.certificateToPem(ca), certPem: forge.pki.certificateToPem(leaf), keyPem: forge.pki.privateKeyToPem(keys.privateKey) };
}
