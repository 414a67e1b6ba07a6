'use strict';
// The deployed code's repository and commit, for the backends that link a profile's frames
// to source (Datadog's source code integration reads `git.repository_url` and
// `git.commit.sha` tags). Found as dd-trace finds them (git_metadata.js), so both agree:
// DD_GIT_REPOSITORY_URL / DD_GIT_COMMIT_SHA, else those keys in DD_TAGS, else a
// `git.properties` file (DD_GIT_PROPERTIES_FILE, default `<cwd>/git.properties`), else the
// `.git` folder (DD_GIT_FOLDER_PATH, default `<cwd>/.git`): origin's URL and HEAD's commit.
// DD_TRACE_GIT_METADATA_ENABLED=false turns it off.
//
// Everything read is untrusted: files are read up to 64 KiB, a URL loses its user and
// password and must be one plain token (no spaces, commas or control characters, at most
// 1 KiB), a commit is 40 or 64 hex digits; anything else is left out, never an error.

const fs = require('node:fs');
const path = require('node:path');

const MAX_FILE = 64 * 1024;
const SHA = /^(?:[0-9a-f]{40}|[0-9a-f]{64})$/;

/** A file's text, or undefined when missing, unreadable, not a file or over 64 KiB. */
function readSmall(file) {
  let fd;
  try {
    // Non-blocking: opening a FIFO for reading would wait for a writer.
    fd = fs.openSync(file, fs.constants.O_RDONLY | fs.constants.O_NONBLOCK);
    const st = fs.fstatSync(fd);
    if (!st.isFile() || st.size > MAX_FILE) return undefined;
    const buf = Buffer.alloc(st.size);
    const n = fs.readSync(fd, buf, 0, st.size, 0);
    return buf.toString('utf8', 0, n);
  } catch {
    return undefined;
  } finally {
    if (fd !== undefined) fs.closeSync(fd);
  }
}

/** A repository URL as a tag may carry it: credentials removed; undefined when unfit. */
function cleanUrl(text) {
  if (typeof text !== 'string') return undefined;
  let url = text.trim();
  // eslint-disable-next-line no-control-regex -- control characters are what it rejects
  if (url === '' || url.length > 1024 || /[\s,\u0000-\u001f\u007f]/.test(url)) return undefined;
  try {
    const u = new URL(url);
    if (u.username || u.password) url = `${u.origin}${u.pathname}`;
  } catch {
    // scp-like (git@host:org/repo.git) or a path: nothing to strip
  }
  return url;
}

const cleanSha = (text) => {
  const s = typeof text === 'string' ? text.trim().toLowerCase() : '';
  return SHA.test(s) ? s : undefined;
};

/** `git.commit.sha=` and `git.repository_url=` of a git.properties file. */
function fromProperties(text) {
  const out = {};
  for (const line of (text ?? '').split('\n')) {
    const i = line.indexOf('=');
    if (i < 0) continue;
    const key = line.slice(0, i).trim();
    if (key === 'git.commit.sha') out.commitSha ??= cleanSha(line.slice(i + 1));
    else if (key === 'git.repository_url') out.repositoryUrl ??= cleanUrl(line.slice(i + 1));
  }
  return out;
}

/** The url of `[remote "origin"]` in a git config. */
function originUrl(config) {
  let inOrigin = false;
  for (const raw of (config ?? '').split('\n')) {
    const line = raw.trim();
    if (line.startsWith('[')) {
      inOrigin = /^\[remote\s+"origin"\]$/i.test(line);
      continue;
    }
    if (!inOrigin) continue;
    const i = line.indexOf('=');
    if (i >= 0 && line.slice(0, i).trim().toLowerCase() === 'url') return cleanUrl(line.slice(i + 1));
  }
  return undefined;
}

/** The git directory of a `.git` path: itself, or where a worktree's `.git` file points. */
function gitDirs(dotGit) {
  let gitDir = dotGit;
  try {
    if (fs.statSync(dotGit).isFile()) {
      const m = /^gitdir:\s*(.+)$/m.exec(readSmall(dotGit) ?? '');
      if (!m) return undefined;
      gitDir = path.resolve(path.dirname(dotGit), m[1].trim());
    }
  } catch {
    return undefined;
  }
  // A linked worktree keeps its HEAD; refs and config live in the common directory.
  const common = readSmall(path.join(gitDir, 'commondir'));
  const commonDir = common ? path.resolve(gitDir, common.trim()) : gitDir;
  return { gitDir, commonDir };
}

/** HEAD's commit: detached, or the branch it names (a loose ref, else packed-refs). */
function headSha({ gitDir, commonDir }) {
  const head = (readSmall(path.join(gitDir, 'HEAD')) ?? '').trim();
  if (cleanSha(head)) return cleanSha(head);
  const m = /^ref:\s*(refs\/[A-Za-z0-9._/-]+)$/.exec(head);
  if (!m || m[1].split('/').includes('..')) return undefined;
  const ref = m[1];
  for (const dir of [gitDir, commonDir]) {
    const sha = cleanSha(readSmall(path.join(dir, ref)));
    if (sha) return sha;
  }
  for (const line of (readSmall(path.join(commonDir, 'packed-refs')) ?? '').split('\n')) {
    const [sha, name] = line.trim().split(/\s+/);
    if (name === ref && cleanSha(sha)) return cleanSha(sha);
  }
  return undefined;
}

const off = (v) => ['false', '0', 'no', 'off'].includes(String(v ?? '').trim().toLowerCase());

/**
 * `{ repositoryUrl, commitSha }` (either may be undefined) for this process.
 * @param {NodeJS.ProcessEnv} env
 * @param {Record<string, string>} tags DD_TAGS/SELFPROF_TAGS as parsed
 */
function gitMetadata(env = process.env, tags = {}, cwd = process.cwd()) {
  if (off(env.DD_TRACE_GIT_METADATA_ENABLED)) return {};
  let repositoryUrl = cleanUrl(env.DD_GIT_REPOSITORY_URL ?? tags['git.repository_url']);
  let commitSha = cleanSha(env.DD_GIT_COMMIT_SHA ?? tags['git.commit.sha']);
  if (!repositoryUrl || !commitSha) {
    const props = fromProperties(readSmall(env.DD_GIT_PROPERTIES_FILE || path.join(cwd, 'git.properties')));
    repositoryUrl ??= props.repositoryUrl;
    commitSha ??= props.commitSha;
  }
  if (!repositoryUrl || !commitSha) {
    const dirs = gitDirs(env.DD_GIT_FOLDER_PATH || path.join(cwd, '.git'));
    if (dirs) {
      repositoryUrl ??= originUrl(readSmall(path.join(dirs.commonDir, 'config')));
      commitSha ??= headSha(dirs);
    }
  }
  return { repositoryUrl, commitSha };
}

module.exports = { gitMetadata, cleanUrl };
