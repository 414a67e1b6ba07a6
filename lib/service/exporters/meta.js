'use strict';

/** The service's env, version and user tags, as one object (absent ones left out). */
function identity(meta) {
  return { ...(meta.env && { env: meta.env }), ...(meta.version && { version: meta.version }), ...meta.tags };
}

module.exports = { identity };
