'use strict';
// The repository and commit tags (Datadog's source code integration, OpenTelemetry's vcs.*):
// found in real git checkouts as dd-trace finds them, and nothing from a hostile one.
const { test } = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { execFileSync } = require('node:child_process');
const { gitMetadata } = require('../lib/service/git');
const { resourceOf } = require('../lib/service/exporters/otlp');

function tmp(t) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'selfprof-git-'));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  return dir;
}
const git = (cwd, ...args) => execFileSync('git', ['-c', 'user.name=t', '-c', 'user.email=t@example.com', ...args], { cwd, encoding: 'utf8' }).trim();

function repo(t, origin = 'https://deploy:tok3n@example.com/acme/app.git') {
  const cwd = tmp(t);
  git(cwd, 'init', '-q');
  if (origin) git(cwd, 'remote', 'add', 'origin', origin);
  git(cwd, 'commit', '-q', '--allow-empty', '-m', 'one');
  return { cwd, sha: git(cwd, 'rev-parse', 'HEAD') };
}

test('git: origin without credentials and HEAD, on a branch, detached, packed, and in a linked worktree', (t) => {
  const { cwd, sha } = repo(t);
  assert.deepEqual(gitMetadata({}, {}, cwd), { repositoryUrl: 'https://example.com/acme/app.git', commitSha: sha });

  git(cwd, 'commit', '-q', '--allow-empty', '-m', 'two');
  const second = git(cwd, 'rev-parse', 'HEAD');
  git(cwd, 'pack-refs', '--all'); // the branch now lives in packed-refs only
  assert.equal(fs.existsSync(path.join(cwd, '.git', 'refs', 'heads', git(cwd, 'branch', '--show-current'))), false);
  assert.equal(gitMetadata({}, {}, cwd).commitSha, second);

  git(cwd, 'checkout', '-q', '--detach', sha);
  assert.equal(gitMetadata({}, {}, cwd).commitSha, sha);

  const wt = path.join(tmp(t), 'wt');
  git(cwd, 'worktree', 'add', '-q', '--detach', wt, second);
  assert.deepEqual(gitMetadata({}, {}, wt), { repositoryUrl: 'https://example.com/acme/app.git', commitSha: second });

  // scp-like remotes are kept as written.
  git(cwd, 'remote', 'set-url', 'origin', 'git@github.com:acme/app.git');
  assert.equal(gitMetadata({}, {}, cwd).repositoryUrl, 'git@github.com:acme/app.git');
});

test('git: DD_GIT_* and DD_TAGS win, then git.properties, then .git; DD_TRACE_GIT_METADATA_ENABLED=false turns it off', (t) => {
  const { cwd, sha } = repo(t);
  const other = 'a'.repeat(40);
  assert.deepEqual(gitMetadata({ DD_GIT_REPOSITORY_URL: 'https://x:y@example.org/r.git', DD_GIT_COMMIT_SHA: other }, {}, cwd), {
    repositoryUrl: 'https://example.org/r.git',
    commitSha: other,
  });
  assert.deepEqual(gitMetadata({}, { 'git.repository_url': 'https://example.org/t.git' }, cwd), { repositoryUrl: 'https://example.org/t.git', commitSha: sha });
  fs.writeFileSync(path.join(cwd, 'git.properties'), `git.commit.sha=${'b'.repeat(40)}\ngit.repository_url=https://example.net/p.git\n`);
  assert.deepEqual(gitMetadata({}, {}, cwd), { repositoryUrl: 'https://example.net/p.git', commitSha: 'b'.repeat(40) });
  for (const v of ['false', '0', 'FALSE']) assert.deepEqual(gitMetadata({ DD_TRACE_GIT_METADATA_ENABLED: v }, {}, cwd), {});
  // A folder given by DD_GIT_FOLDER_PATH.
  fs.rmSync(path.join(cwd, 'git.properties'));
  assert.equal(gitMetadata({ DD_GIT_FOLDER_PATH: path.join(cwd, '.git') }, {}, tmp(t)).commitSha, sha);
});

test('git: hostile checkouts give no tag, never an error', (t) => {
  // No repository at all.
  assert.deepEqual(gitMetadata({}, {}, tmp(t)), { repositoryUrl: undefined, commitSha: undefined });
  const { cwd } = repo(t, null);
  const dotGit = path.join(cwd, '.git');
  // Values that would break a `k:v,k:v` tag list or are not commits.
  fs.appendFileSync(path.join(dotGit, 'config'), '[remote "origin"]\n\turl = https://example.com/a,b:c d\n');
  assert.equal(gitMetadata({}, {}, cwd).repositoryUrl, undefined);
  fs.writeFileSync(path.join(dotGit, 'HEAD'), 'ref: refs/heads/../../../../etc/passwd\n');
  assert.equal(gitMetadata({}, {}, cwd).commitSha, undefined);
  fs.writeFileSync(path.join(dotGit, 'HEAD'), 'not-a-sha\n');
  assert.equal(gitMetadata({}, {}, cwd).commitSha, undefined);
  assert.equal(gitMetadata({ DD_GIT_COMMIT_SHA: 'xyz', DD_GIT_REPOSITORY_URL: 'a\nb' }, {}, cwd).commitSha, undefined);
  // A huge config is not read (64 KiB at most); a .git file pointing nowhere; a FIFO is not a file.
  fs.writeFileSync(path.join(dotGit, 'config'), `[remote "origin"]\n\turl = https://example.com/big.git\n${'#'.repeat(1 << 20)}\n`);
  assert.equal(gitMetadata({}, {}, cwd).repositoryUrl, undefined);
  const wt = tmp(t);
  fs.writeFileSync(path.join(wt, '.git'), 'gitdir: /nonexistent/place\n');
  assert.deepEqual(gitMetadata({}, {}, wt), { repositoryUrl: undefined, commitSha: undefined });
  const fifoDir = tmp(t);
  execFileSync('mkfifo', [path.join(fifoDir, 'git.properties')]);
  assert.deepEqual(gitMetadata({}, {}, fifoDir), { repositoryUrl: undefined, commitSha: undefined });
});

test('git: OTLP resources carry vcs.repository.url.full and vcs.ref.head.revision', () => {
  const sha = 'c'.repeat(40);
  const attrs = new Map(resourceOf({ service: 's', host: 'h', profilerVersion: '0', git: { repositoryUrl: 'https://example.com/r.git', commitSha: sha } }, {}));
  assert.equal(attrs.get('vcs.repository.url.full'), 'https://example.com/r.git');
  assert.equal(attrs.get('vcs.ref.head.revision'), sha);
});
