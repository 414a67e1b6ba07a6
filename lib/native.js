'use strict';
// The native addon (napi-rs), in one place: every module that needs it requires this.
module.exports = require('../binding.js');
