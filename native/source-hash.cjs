#!/usr/bin/env node
// The hash of the addon's sources (native/*.c and *.h, by name and content): binding.gyp compiles
// it into the addon (`sourceHash`), and src/base/addon.ts compares it with the sources beside the
// build, so a build older than its sources is said, not run as if current. Prints it when run.
'use strict';
const { createHash } = require('node:crypto');
const { readdirSync, readFileSync } = require('node:fs');
const { join } = require('node:path');

function sourceHash(dir = __dirname) {
  const hash = createHash('sha256');
  for (const name of readdirSync(dir).filter((f) => /\.[ch]$/.test(f)).sort()) {
    hash.update(`${name}\0`);
    hash.update(readFileSync(join(dir, name)));
    hash.update('\0');
  }
  return hash.digest('hex').slice(0, 16);
}

module.exports = { sourceHash };
if (require.main === module) process.stdout.write(sourceHash());
