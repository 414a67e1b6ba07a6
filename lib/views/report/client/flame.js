// A flame graph of a tree of { key, name, total, children, parent } nodes, as absolutely
// positioned boxes (only those at least half a pixel wide): root at the top, or at the
// bottom when `inverted` (callers). Click a box to zoom into it, click it again or an
// ancestor to zoom out. The page decides colors, descriptions and extra attributes.
// Then the flame graph view (createFlameView): the kept samples' call tree, searchable.

const ROW = 18;

/**
 * @param {HTMLElement} box
 * @param {{ inverted?: boolean, color?: (node: any) => string, describe?: (node: any) => string,
 *   decorate?: (el: HTMLElement, node: any) => void, onHover?: (node: any) => void,
 *   onZoom?: (node: any) => void }} [options]
 */
function createFlame(box, { inverted = false, color, describe, decorate, onHover, onZoom } = {}) {
  let root = null;
  let nodes = new Map();
  let zoomKey = 'root';
  let search = '';

  const matches = (node) => search !== '' && node !== root && node.name.toLowerCase().includes(search);

  function render() {
    if (!root) {
      box.replaceChildren();
      return;
    }
    const width = box.clientWidth;
    const zoom = nodes.get(zoomKey) || root;
    const chain = [];
    for (let n = zoom; n; n = n.parent) chain.unshift(n);
    const boxes = [];
    let maxDepth = 0;
    chain.forEach((node, d) => boxes.push([node, 0, width, d, node !== zoom]));
    const scale = zoom.total ? width / zoom.total : 0;
    (function layout(node, x, d) {
      for (const child of node.children) {
        const w = child.total * scale;
        if (w >= 0.5) {
          boxes.push([child, x, w, d, false]);
          layout(child, x, d + 1);
        }
        x += w;
      }
    })(zoom, 0, chain.length);
    for (const b of boxes) maxDepth = Math.max(maxDepth, b[3]);
    const frag = document.createDocumentFragment();
    for (const [node, x, w, d, ancestor] of boxes) {
      const div = document.createElement('div');
      div.className = 'frame';
      if (ancestor) div.classList.add('ancestor');
      if (node.attributed) div.classList.add('attributed');
      if (matches(node)) div.classList.add('match');
      div.title = describe(node);
      div.dataset.name = node.name;
      div.dataset.key = node.key;
      if (decorate) decorate(div, node);
      else div.dataset.samples = node.total;
      const top = (inverted ? maxDepth - d : d) * ROW;
      div.style.cssText = `left:${x}px;top:${top}px;width:${w}px;background:${color(node)}`;
      if (w > 28) div.textContent = node.name;
      frag.append(div);
    }
    box.replaceChildren(frag);
    box.style.height = (maxDepth + 1) * ROW + 2 + 'px';
    box.classList.toggle('searching', search !== '');
  }

  // The node key of the box an event hit (the graph's own boxes carry one).
  const keyOf = (e) => {
    const el = /** @type {HTMLElement} */ (e.target);
    return el.dataset && el.dataset.key;
  };
  box.addEventListener('click', (e) => {
    const key = keyOf(e);
    if (!key || !nodes.has(key)) return;
    zoomKey = key === zoomKey ? (nodes.get(key).parent || root).key : key;
    render();
    if (onZoom) onZoom(nodes.get(zoomKey) || root);
  });
  box.addEventListener('mouseover', (e) => {
    const key = keyOf(e);
    if (key && nodes.has(key) && onHover) onHover(nodes.get(key));
  });

  return {
    /** Shows a new tree, keeping the zoom if its node is still there. */
    show(tree, nodeMap) {
      root = tree;
      nodes = nodeMap || indexTree(tree);
      if (!nodes.has(zoomKey)) zoomKey = root ? root.key : 'root';
      render();
    },
    render,
    setSearch(text) {
      search = text;
      render();
    },
    resetZoom() {
      zoomKey = root ? root.key : 'root';
      render();
      if (onZoom) onZoom(root);
    },
    get zoomed() {
      return nodes.get(zoomKey) || root;
    },
    /** Samples in the topmost nodes matching the search. */
    matched() {
      let n = 0;
      (function count(node) {
        if (matches(node)) n += node.total;
        else node.children.forEach(count);
      })(root);
      return n;
    },
  };
}

function indexTree(root) {
  const nodes = new Map();
  if (!root) return nodes;
  const stack = [root];
  while (stack.length) {
    const node = stack.pop();
    nodes.set(node.key, node);
    stack.push(...node.children);
  }
  return nodes;
}

/** What a call-tree node of model m is, for its box's title and the details line (of n kept). */
function describeNode(m, node, n) {
  return [
    node.name,
    node.frame ? m.locationOf(node.frame) : node.attributed ? 'attributed: V8 gives GC no stack; shown under the JS sample just before it' : node.pseudo ? 'not JS' : '',
    `${amount(m, node.total)} (${pct(node.total, n)}%)`,
  ]
    .filter(Boolean)
    .join(' — ');
}

/** A call-tree node's color: the root and V8's pseudo-frames grey, functions by colorOfFrame. */
function colorOfNode(m, node) {
  return node.parent === null ? '#d6d6d6' : node.attributed ? '#a9a9a9' : node.pseudo ? '#bdbdbd' : colorOfFrame(m, node.frame, node.name);
}

/**
 * The flame graph view: the call tree of the kept samples (a callTree of model m), with the
 * search's matches counted and the zoomed function offered to the sandwich view.
 */
function createFlameView(m) {
  let tree = null;
  let search = '';
  const graph = createFlame($('flamegraph'), {
    color: (node) => colorOfNode(m, node),
    describe: (node) => describeNode(m, node, tree.n),
    // Whose code each box is (the legend's colors), for readers of the page and its tests.
    decorate: (div, node) => {
      div.dataset.samples = node.total;
      if (node.frame) div.dataset.origin = originOfFrame(m, node.frame);
    },
    onHover: (node) => ($('details').textContent = describeNode(m, node, tree.n)),
    onZoom: (node) => ($('to-sandwich').disabled = !node.frame),
  });
  function showSearch() {
    $('to-sandwich').disabled = !graph.zoomed.frame;
    $('search-result').textContent = search ? `matched: ${amount(m, graph.matched())} (${pct(graph.matched(), tree.n)}%)` : '';
  }
  return {
    /** Shows a new call tree (callTree's result). */
    show(view) {
      tree = view;
      graph.show(view.root, view.nodes);
      showSearch();
    },
    render: graph.render,
    /** Marks the functions whose name contains `text` (lower case). */
    setSearch(text) {
      search = text;
      graph.setSearch(text);
      showSearch();
    },
    resetZoom: graph.resetZoom,
    get zoomed() {
      return graph.zoomed;
    },
  };
}
