//! Fuel's node document (nailgun-agent's `{mac, meta}`) and stoker's [`Inventory`], both ways:
//! [`inventory_from_fuel`] reads `meta.interfaces`, `meta.cpu`, `meta.memory`, `meta.disks` and
//! `meta.system` (a top-level `mac` when `meta` lists no interface) and validates the result as
//! the hello's inventory is; [`fuel_meta`] writes the `meta` Nailgun's clients read back. Pure:
//! JSON in, JSON out.

use serde_json::{Value, json};

use super::node::{Inventory, InventoryError, inventory_from_value};

/// stoker's inventory from Fuel's node document, validated as the hello's is. A field at fault
/// is named in stoker's terms. The caller bounds the body's size
/// ([`super::node::MAX_INVENTORY_BYTES`]).
pub fn inventory_from_fuel(body: &[u8]) -> Result<Inventory, InventoryError> {
    let doc: Value =
        serde_json::from_slice(body).map_err(|e| InventoryError::Json(e.to_string()))?;
    let meta = &doc["meta"];
    let mut interfaces: Vec<Value> = meta["interfaces"]
        .as_array()
        .map(|nics| {
            nics.iter()
                .map(|n| {
                    json!({
                        "name": n["name"],
                        "mac": n["mac"],
                        "speed_mbps": n["current_speed"].as_u64().or(n["max_speed"].as_u64()),
                        "link": n["state"].as_str().map(|s| s == "up"),
                    })
                })
                .collect()
        })
        .unwrap_or_default();
    if interfaces.is_empty() && doc["mac"].is_string() {
        interfaces.push(json!({"name": "eth0", "mac": doc["mac"]}));
    }
    let cpu = &meta["cpu"];
    let disks: Vec<Value> = meta["disks"]
        .as_array()
        .map(|ds| {
            ds.iter()
                .map(|d| {
                    json!({"name": d["name"], "size_bytes": d["size"], "model": d["model"],
                           "serial": d["serial"]})
                })
                .collect()
        })
        .unwrap_or_default();
    let system = &meta["system"];
    let ours = json!({
        "interfaces": interfaces,
        "cpu": {"count": cpu["total"], "model": cpu["spec"][0]["model"]},
        "memory_bytes": meta["memory"]["total"],
        "disks": disks,
        "system": {"vendor": system["manufacturer"], "product": system["product"],
                   "serial": system["serial"]},
    });
    inventory_from_value(&strip_nulls(ours))
}

/// Fuel's `meta` document of a node from stoker's inventory: the inverse of
/// [`inventory_from_fuel`], for the clients that read Nailgun's node shape (`fuel2 node show`).
pub fn fuel_meta(inv: &Inventory) -> Value {
    let interfaces: Vec<Value> = inv
        .interfaces
        .iter()
        .enumerate()
        .map(|(i, n)| {
            json!({
                "name": n.name,
                "mac": n.mac.as_str(),
                "pxe": i == 0,
                "state": n.link.map(|up| if up { "up" } else { "down" }),
                "current_speed": n.speed_mbps,
                "max_speed": n.speed_mbps,
            })
        })
        .collect();
    let disks: Vec<Value> = inv
        .disks
        .iter()
        .map(|d| {
            json!({"name": d.name, "disk": d.name, "size": d.size_bytes, "model": d.model,
                   "serial": d.serial, "removable": "0", "extra": []})
        })
        .collect();
    json!({
        "interfaces": interfaces,
        "cpu": {"total": inv.cpu.count, "spec": [{"model": inv.cpu.model, "frequency": null}]},
        "memory": {"total": inv.memory_bytes},
        "disks": disks,
        "system": {"manufacturer": inv.system.vendor, "product": inv.system.product,
                   "serial": inv.system.serial},
    })
}

/// Fuel's agents send `null` for what they could not read; stoker's inventory leaves it out.
fn strip_nulls(v: Value) -> Value {
    match v {
        Value::Object(m) => Value::Object(
            m.into_iter()
                .filter(|(_, v)| !v.is_null())
                .map(|(k, v)| (k, strip_nulls(v)))
                .collect(),
        ),
        Value::Array(a) => Value::Array(a.into_iter().map(strip_nulls).collect()),
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::FieldError;

    #[test]
    fn a_fuel_document_becomes_an_inventory_and_back() {
        let doc = json!({"mac": "52:54:00:fe:00:01", "meta": {
            "interfaces": [{"name": "eth0", "mac": "52:54:00:FE:00:01", "max_speed": 1000,
                            "state": "up"}],
            "cpu": {"total": 8, "spec": [{"model": "Xeon"}]},
            "memory": {"total": 1024},
            "disks": [{"name": "sda", "size": 100, "serial": null}],
            "system": {"manufacturer": "QEMU"}}});
        let inv = inventory_from_fuel(doc.to_string().as_bytes()).unwrap();
        assert_eq!(inv.primary_mac().unwrap().as_str(), "52:54:00:fe:00:01");
        assert_eq!(inv.interfaces[0].speed_mbps, Some(1000));
        assert_eq!(inv.interfaces[0].link, Some(true));
        assert_eq!(
            (inv.cpu.count, inv.memory_bytes, inv.disk_bytes()),
            (8, 1024, 100)
        );
        let meta = fuel_meta(&inv);
        assert_eq!(meta["cpu"]["total"], 8);
        assert_eq!(meta["disks"][0]["size"], 100);
        assert_eq!(meta["system"]["manufacturer"], "QEMU");
    }

    #[test]
    fn a_bad_fuel_document_names_its_fields_in_our_terms() {
        let e = inventory_from_fuel(b"{\"meta\": {\"cpu\": {\"total\": -1}}}").unwrap_err();
        let InventoryError::Fields(fields) = e else {
            panic!("{e:?}")
        };
        let names: Vec<&str> = fields
            .iter()
            .map(|f: &FieldError| f.field.as_str())
            .collect();
        assert_eq!(names, ["interfaces", "cpu.count", "memory_bytes"]);
        assert!(matches!(
            inventory_from_fuel(b"{\"meta\""),
            Err(InventoryError::Json(_))
        ));
    }
}
