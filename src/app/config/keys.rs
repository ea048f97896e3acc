//! The keys `config.toml` knows, and the nearest one to a key it does not know.
//!
//! The key list is read from the serialised defaults, so it follows the structs without a
//! second list to keep in step.

use std::collections::BTreeMap;

use super::Config;

/// How alike (Jaro-Winkler, 0..1) a known key must be to an unknown one to be suggested.
const SUGGEST_SIMILARITY: f64 = 0.7;

/// Sections and their keys, sorted by name.
fn known_keys() -> Vec<(String, Vec<String>)> {
    let value = serde_json::to_value(Config::default()).expect("the default config serialises");
    let serde_json::Value::Object(sections) = value else {
        unreachable!("Config serialises to a map")
    };
    sections
        .into_iter()
        .map(|(section, keys)| {
            let keys = match keys {
                serde_json::Value::Object(keys) => keys.into_iter().map(|(k, _)| k).collect(),
                _ => Vec::new(),
            };
            (section, keys)
        })
        .collect()
}

/// The candidate most like `word`, when it is alike enough to be what was meant.
pub fn nearest<'a>(word: &str, candidates: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    candidates
        .into_iter()
        .map(|c| (strsim::jaro_winkler(word, c), c))
        .filter(|(score, _)| *score >= SUGGEST_SIMILARITY)
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, c)| c)
}

/// For a file whose TOML is well formed: the first unknown section or key, with the nearest
/// known one (or the section a misplaced key belongs to). None when every key is known.
pub fn unknown_key_hint(text: &str) -> Option<String> {
    let table: toml::Table = text.parse().ok()?;
    let known: BTreeMap<String, Vec<String>> = known_keys().into_iter().collect();
    let home = |key: &str| known.iter().find(|(_, ks)| ks.iter().any(|k| k == key));
    for (section, value) in &table {
        let Some(keys) = known.get(section) else {
            if let (false, Some((home, _))) = (value.is_table(), home(section)) {
                return Some(format!("`{section}` belongs in [{home}]"));
            }
            let sections = known.keys().map(String::as_str);
            return Some(match nearest(section, sections) {
                Some(s) => format!("unknown section [{section}]: did you mean [{s}]?"),
                None => format!(
                    "unknown section [{section}]; the sections are: {}",
                    list(known.keys())
                ),
            });
        };
        let toml::Value::Table(entries) = value else {
            continue;
        };
        let Some(key) = entries.keys().find(|k| !keys.contains(k)) else {
            continue;
        };
        if let Some(k) = nearest(key, keys.iter().map(String::as_str)) {
            return Some(format!(
                "unknown key `{section}.{key}`: did you mean `{section}.{k}`?"
            ));
        }
        if let Some((home, _)) = home(key) {
            return Some(format!(
                "unknown key `{section}.{key}`: `{key}` belongs in [{home}]"
            ));
        }
        return Some(format!(
            "unknown key `{section}.{key}`; the keys of [{section}] are: {}",
            list(keys)
        ));
    }
    None
}

fn list<'a>(items: impl IntoIterator<Item = &'a String>) -> String {
    items
        .into_iter()
        .map(String::as_str)
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_keys_follow_the_structs() {
        let keys: BTreeMap<_, _> = known_keys().into_iter().collect();
        assert_eq!(
            keys.keys().map(String::as_str).collect::<Vec<_>>(),
            ["game", "gpu", "onnxruntime", "render", "upscale", "window"]
        );
        // Options (None by default) are keys too.
        assert!(keys["render"].contains(&"render_width".to_string()));
        assert!(keys["render"].contains(&"msaa".to_string()));
        assert!(keys["window"].contains(&"vsync".to_string()));
    }

    #[test]
    fn nearest_needs_a_close_match() {
        let keys = ["width", "height", "vsync"];
        assert_eq!(nearest("widht", keys), Some("width"));
        assert_eq!(nearest("hieght", keys), Some("height"));
        assert_eq!(nearest("colour", keys), None);
    }

    #[test]
    fn hints() {
        assert_eq!(unknown_key_hint("[window]\nwidth = 3"), None);
        assert_eq!(
            unknown_key_hint("[window"),
            None,
            "syntax errors are toml's"
        );
        assert_eq!(
            unknown_key_hint("[rendr]\nscale = 2").unwrap(),
            "unknown section [rendr]: did you mean [render]?"
        );
        assert_eq!(
            unknown_key_hint("[render]\noutput_widht = 2").unwrap(),
            "unknown key `render.output_widht`: did you mean `render.output_width`?"
        );
        assert_eq!(
            unknown_key_hint("[window]\nscale = 2").unwrap(),
            "unknown key `window.scale`: `scale` belongs in [render]"
        );
        assert_eq!(
            unknown_key_hint("[game]\nzzz = 1").unwrap(),
            "unknown key `game.zzz`; the keys of [game] are: mouse_sensitivity, seed"
        );
        assert_eq!(
            unknown_key_hint("scale = 2").unwrap(),
            "`scale` belongs in [render]"
        );
    }
}
