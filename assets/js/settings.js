// The Settings form's restrictions, evaluated again while the operator edits, as Fuel's
// Settings tab did. The server renders, for each section and setting whose restrictions read a
// setting of the form, `data-restrict`: a list of {a: action, c: condition} whose condition is a
// tree (src/engine/attributes.rs, live_tree): ["v", value], ["s", "G.A.value" or
// "G.metadata.enabled", value now], ["not", x], [op, left, right] for or, and, ==, !=, in, with
// Nailgun's semantics (Python's truth, == and in; and/or give an operand). Every other model
// path is already a value. A section that is hidden, disabled or switched off disables its
// settings; a disabled control is not sent, so its stored value is kept. Without JavaScript the
// page shows what the server evaluated, and the server checks every save again.
(function () {
  "use strict";
  var form = document.querySelector("form.settings-form[data-live]");
  if (!form) { return; }

  function controls(name) {
    return Array.prototype.filter.call(form.elements, function (el) {
      return el.name === name && el.type !== "hidden";
    });
  }
  // The value a condition reads: the form's control for the setting, typed as the document
  // holds it, or the value the page was made with when the form has no such control.
  function read(path, now) {
    var parts = path.split(".");
    var name = parts[1] === "metadata" ? "g." + parts[0] : "v." + parts[0] + "." + parts[1];
    var els = controls(name);
    // A disabled control is not sent: the save keeps the stored value, so that is what counts.
    if (!els.length || els[0].disabled) { return now; }
    var el = els[0];
    if (el.type === "checkbox") { return el.checked; }
    if (el.type === "radio") {
      var on = els.filter(function (r) { return r.checked; })[0];
      return on ? on.value : null;
    }
    if (el.type === "password") { return now; }
    if (el.type === "number") {
      if (el.value.trim() === "") { return null; }
      var n = Number(el.value);
      return isNaN(n) ? el.value : n;
    }
    if (el.dataset.kind === "list") {
      return el.value.split("\n").map(function (s) { return s.trim(); }).filter(Boolean);
    }
    return el.value;
  }

  function truthy(v) {
    if (v === null || v === undefined || v === false) { return false; }
    if (typeof v === "number" || typeof v === "string") { return v !== 0 && v !== ""; }
    if (Array.isArray(v)) { return v.length > 0; }
    if (typeof v === "object") { return Object.keys(v).length > 0; }
    return !!v;
  }
  function num(v) {
    if (typeof v === "boolean") { return v ? 1 : 0; }
    return typeof v === "number" ? v : null;
  }
  function same(a, b) {
    if (a === b) { return true; }
    if (Array.isArray(a) && Array.isArray(b)) {
      return a.length === b.length && a.every(function (x, i) { return eq(x, b[i]); });
    }
    if (a && b && typeof a === "object" && typeof b === "object" && !Array.isArray(a) && !Array.isArray(b)) {
      var ka = Object.keys(a), kb = Object.keys(b);
      return ka.length === kb.length && ka.every(function (k) {
        return Object.prototype.hasOwnProperty.call(b, k) && eq(a[k], b[k]);
      });
    }
    return false;
  }
  // Python's ==: booleans are numbers.
  function eq(a, b) {
    var x = num(a), y = num(b);
    return x !== null && y !== null ? x === y : same(a, b);
  }
  function evaluate(t) {
    switch (t[0]) {
      case "v": return t[1];
      case "s": return read(t[1], t[2]);
      case "not": return !truthy(evaluate(t[1]));
      case "or": { var l = evaluate(t[1]); return truthy(l) ? l : evaluate(t[2]); }
      case "and": { var a = evaluate(t[1]); return truthy(a) ? evaluate(t[2]) : a; }
      case "==": return eq(evaluate(t[1]), evaluate(t[2]));
      case "!=": return !eq(evaluate(t[1]), evaluate(t[2]));
      case "in": {
        var item = evaluate(t[1]), box = evaluate(t[2]);
        if (typeof box === "string" && typeof item === "string") { return box.indexOf(item) >= 0; }
        if (Array.isArray(box)) { return box.some(function (x) { return eq(x, item); }); }
        if (box && typeof box === "object") {
          return typeof item === "string" && Object.prototype.hasOwnProperty.call(box, item);
        }
        throw new Error("`in` needs a string, list or dict");
      }
      default: throw new Error("unknown operator " + t[0]);
    }
  }

  // How an element's restrictions stand: hide, disable, and each one's truth (for its note).
  var parsed = new WeakMap();
  function restrictions(el) {
    if (!el.dataset.restrict) { return []; }
    if (!parsed.has(el)) {
      var list = [];
      try { list = JSON.parse(el.dataset.restrict); } catch (e) { list = []; }
      parsed.set(el, list);
    }
    return parsed.get(el);
  }
  function stand(el) {
    var out = { hide: false, disable: false, holds: [] };
    restrictions(el).forEach(function (r) {
      var holds = false;
      try { holds = truthy(evaluate(r.c)); } catch (e) { holds = false; }
      out.holds.push(holds);
      if (holds && r.a === "hide") { out.hide = true; }
      if (holds && r.a === "disable") { out.disable = true; }
    });
    return out;
  }
  function notes(box, st) {
    Array.prototype.forEach.call(box.children, function (p) {
      if (p.classList.contains("note") && p.dataset.when !== undefined) {
        p.hidden = !st.holds[Number(p.dataset.when)];
      }
    });
  }
  function disable(els, off) {
    Array.prototype.forEach.call(els, function (c) { c.disabled = off; });
  }

  // Which controls are disabled, as one string to compare.
  function disabledNow() {
    return Array.prototype.map.call(form.elements, function (el) { return el.disabled ? "1" : "0"; }).join("");
  }
  // Disabling a control changes what the conditions read (its stored value from then on), so
  // evaluate again until the disabled controls stop changing: at most once per control.
  function update() {
    var limit = form.elements.length + 1;
    var before;
    do {
      before = disabledNow();
      once();
      limit -= 1;
    } while (limit > 0 && disabledNow() !== before);
  }

  function once() {
    Array.prototype.forEach.call(form.querySelectorAll("fieldset.settings-section"), function (section) {
      var st = stand(section);
      var legend = section.querySelector(":scope > legend");
      var toggle = legend && legend.querySelector('input[type="checkbox"]');
      var off = !!toggle && !toggle.checked;
      var disabled = section.hasAttribute("data-fixed-disabled") || st.disable;
      section.hidden = st.hide;
      section.classList.toggle("off", off);
      section.classList.toggle("disabled", disabled);
      if (legend) { disable(legend.querySelectorAll("input"), st.hide || disabled); }
      disable(section.querySelectorAll(":scope > .field-version select"), st.hide);
      notes(section, st);
      var locked = st.hide || disabled || off;
      Array.prototype.forEach.call(section.querySelectorAll(":scope > .field.setting"), function (field) {
        var fs = stand(field);
        var dis = locked || fs.hide || fs.disable || field.hasAttribute("data-fixed-disabled");
        field.hidden = fs.hide;
        field.classList.toggle("disabled", dis);
        disable(field.querySelectorAll("input, select, textarea"), dis);
        notes(field, fs);
      });
    });
    Array.prototype.forEach.call(form.querySelectorAll("section.settings-group"), function (group) {
      var shown = Array.prototype.some.call(group.querySelectorAll("fieldset.settings-section"), function (s) { return !s.hidden; });
      group.hidden = !shown;
      var link = document.querySelector('nav.jump a[href="#' + group.id + '"]');
      if (link && link.parentElement) { link.parentElement.hidden = !shown; }
    });
  }

  form.addEventListener("change", update);
  form.addEventListener("input", update);
  update();
})();
