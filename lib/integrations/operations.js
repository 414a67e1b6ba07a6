'use strict';
// Operations as endpoints. A GraphQL API serves every operation at one URL (`POST
// /graphql`): by route, it cannot be sliced at all. The tracers name the operation a
// request runs on a span of their own (OpenTelemetry's instrumentation-graphql: a
// `graphql.execute` span with `graphql.operation.type`/`.name`; dd-trace's graphql plugin:
// its execute span, tagged so as it starts), which the integrations note on the request's
// record as it starts (`noteOperation`). A request that ran one named operation then has
// that operation as its endpoint (`query GetUser`), and its route in a label of its own,
// `http_route`; an anonymous operation, or a batch of several, keeps the route. Read only
// when the request's labels are (most requests never are). gRPC's method is already the
// span's name, so its route. `start({ operationEndpoints: false })` or
// SELFPROF_OPERATION_ENDPOINTS=0 keeps the route for every request.

const { envSwitchOn } = require('../log');

/** On a request's record: the operation it runs (the span naming it), or SEVERAL. */
const OPERATION = Symbol('selfprof.operation');
/** A request that ran more than one operation (a batch). */
const SEVERAL = Symbol('selfprof.severalOperations');

/** Whether operations name endpoints: start()'s option, else the environment's. */
let enabled = null;
function operationEndpoints() {
  if (enabled === null) enabled = envSwitchOn('SELFPROF_OPERATION_ENDPOINTS');
  return enabled;
}

/** Service mode's `operationEndpoints` option (over SELFPROF_OPERATION_ENDPOINTS). */
function setOperationEndpoints(on) {
  enabled = on;
}

/** The request of record `holder` runs operation `op` (what `nameOf` reads its name from). */
function noteOperation(holder, op) {
  holder[OPERATION] = holder[OPERATION] === undefined ? op : SEVERAL;
}

/** `<type> <name>` from an operation's attributes or tags, else undefined (anonymous, or
 * one the instrumentation could not read). */
function operationName(type, name) {
  return typeof type === 'string' && type !== '' && typeof name === 'string' && name !== '' ? `${type} ${name}` : undefined;
}

/**
 * The endpoint labels of a request whose route gives endpoint `route` (`POST /graphql`),
 * with the operation noted on `holder` (its name read by `nameOf(op)`): `{ endpoint }`, or
 * `{ endpoint: 'query GetUser', http_route: route }` where it ran one named operation.
 */
function endpointLabels(route, holder, nameOf) {
  const op = holder[OPERATION];
  if (op === undefined || op === SEVERAL || !operationEndpoints()) return { endpoint: route };
  const name = nameOf(op);
  return name === undefined ? { endpoint: route } : { endpoint: name, http_route: route };
}

module.exports = { operationEndpoints, setOperationEndpoints, noteOperation, operationName, endpointLabels };
