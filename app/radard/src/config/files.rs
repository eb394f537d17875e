//! Where the configuration comes from: a base file and its drop-ins.
//!
//! - The base file is `--config PATH`, else `$RADARD_CONFIG`, else
//!   `/etc/radard/radard.toml`. A base file named by the command line or the
//!   environment must exist; the default one may be absent (a development
//!   machine): the built-in defaults apply, and `--print-config` and the
//!   start-up log say so.
//! - Drop-ins are the `*.toml` files of the directory `BASE.d/` (for the
//!   default, `/etc/radard/radard.toml.d/`), applied over the base file in
//!   lexical order of their names; names starting with `.` are skipped. A
//!   missing directory means no drop-ins.
//! - A drop-in sets keys table by table: a key it names replaces the
//!   base's value, keys it does not name keep theirs. An array replaces the
//!   whole array: a drop-in with `[[sink]]` tables replaces every sink of
//!   the base file (`sink = []` removes them), and `health.command` is
//!   replaced, not extended.
//! - Each file must be valid on its own (types, known keys; errors name
//!   the file and line); the merged result is then validated, and an error
//!   names the key and the file that set it.

use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::path::{Path, PathBuf};

use super::{ConfigError, RadardConfig};

/// The base file when neither `--config` nor the environment names one.
pub const DEFAULT_CONFIG_PATH: &str = "/etc/radard/radard.toml";
/// The environment variable that names the base file.
pub const CONFIG_ENV: &str = "RADARD_CONFIG";

/// Who chose the base file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BaseChoice {
    CommandLine,
    Environment,
    Default,
}

impl BaseChoice {
    fn describe(self) -> &'static str {
        match self {
            BaseChoice::CommandLine => "--config",
            BaseChoice::Environment => "RADARD_CONFIG",
            BaseChoice::Default => "the default path",
        }
    }
}

/// The files a configuration is read from, found but not yet read.
#[derive(Clone, Debug)]
pub struct ConfigSources {
    pub base: PathBuf,
    pub chosen_by: BaseChoice,
    /// False only for an absent default file.
    pub base_found: bool,
    pub drop_in_dir: PathBuf,
    /// In the order they apply.
    pub drop_ins: Vec<PathBuf>,
}

/// The file that set each key: `section.key` for a value, the array's key
/// for an array (`sink`, `health.command`).
type Origins = BTreeMap<String, PathBuf>;

impl ConfigSources {
    /// Finds the base file (`command_line`, else `env`, else the default;
    /// an empty value counts as unset) and lists its drop-ins.
    pub fn locate(command_line: Option<&Path>, env: Option<&OsStr>) -> Result<Self, ConfigError> {
        let (base, chosen_by) = match (command_line, env.filter(|e| !e.is_empty())) {
            (Some(p), _) => (p.to_path_buf(), BaseChoice::CommandLine),
            (None, Some(e)) => (PathBuf::from(e), BaseChoice::Environment),
            (None, None) => (PathBuf::from(DEFAULT_CONFIG_PATH), BaseChoice::Default),
        };
        let base_found = match std::fs::metadata(&base) {
            Ok(_) => true,
            Err(e)
                if e.kind() == std::io::ErrorKind::NotFound && chosen_by == BaseChoice::Default =>
            {
                false
            }
            Err(source) => {
                return Err(ConfigError::Read {
                    path: format!("{} ({})", base.display(), chosen_by.describe()),
                    source,
                });
            }
        };
        let mut dir = base.as_os_str().to_owned();
        dir.push(".d");
        let drop_in_dir = PathBuf::from(dir);
        let drop_ins = list_drop_ins(&drop_in_dir)?;
        Ok(ConfigSources {
            base,
            chosen_by,
            base_found,
            drop_in_dir,
            drop_ins,
        })
    }

    /// The files that are read, in order.
    pub fn files(&self) -> impl Iterator<Item = &Path> {
        self.base_found
            .then_some(self.base.as_path())
            .into_iter()
            .chain(self.drop_ins.iter().map(PathBuf::as_path))
    }

    /// Reads, merges and validates the files over the built-in defaults.
    pub fn load(&self) -> Result<RadardConfig, ConfigError> {
        let mut merged = toml::Table::new();
        let mut origins = Origins::new();
        for path in self.files() {
            let name = path.display().to_string();
            let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
                path: name.clone(),
                source,
            })?;
            // Each file on its own: its syntax, types and keys, reported
            // with its name and line.
            RadardConfig::parse_unvalidated(&text, &name)?;
            let table: toml::Table = toml::from_str(&text).map_err(|e| ConfigError::Parse {
                path: name.clone(),
                message: e.to_string().trim_end().to_string(),
            })?;
            merge(&mut merged, table, path, "", &mut origins);
        }
        let cfg: RadardConfig =
            merged
                .try_into()
                .map_err(|e: toml::de::Error| ConfigError::Parse {
                    path: self
                        .files()
                        .map(|p| p.display().to_string())
                        .collect::<Vec<_>>()
                        .join(" + "),
                    message: e.to_string().trim_end().to_string(),
                })?;
        cfg.validate().map_err(|e| attribute(e, &origins))?;
        Ok(cfg)
    }

    /// `--print-config`'s header: TOML comments naming what was read.
    pub fn header(&self) -> String {
        let mut h =
            String::from("# radard: the effective configuration: built-in defaults, then\n");
        if self.base_found {
            h += &format!(
                "#   {} (base file, by {})\n",
                self.base.display(),
                self.chosen_by.describe()
            );
        } else {
            h += &format!(
                "#   {}: not found (base file, by {}): built-in defaults\n",
                self.base.display(),
                self.chosen_by.describe()
            );
        }
        if self.drop_ins.is_empty() {
            h += &format!("#   no drop-ins in {}/\n", self.drop_in_dir.display());
        }
        for d in &self.drop_ins {
            h += &format!("#   {} (drop-in)\n", d.display());
        }
        h += "# then the command line's options.\n";
        h
    }

    /// One line for the start-up log.
    pub fn summary_line(&self) -> String {
        let base = if self.base_found {
            format!("{} (by {})", self.base.display(), self.chosen_by.describe())
        } else {
            format!(
                "{} not found (by {}): built-in defaults",
                self.base.display(),
                self.chosen_by.describe()
            )
        };
        if self.drop_ins.is_empty() {
            format!(
                "configuration: {base}; no drop-ins in {}/",
                self.drop_in_dir.display()
            )
        } else {
            let names: Vec<String> = self
                .drop_ins
                .iter()
                .map(|d| d.display().to_string())
                .collect();
            format!("configuration: {base}; drop-ins {}", names.join(", "))
        }
    }
}

/// The `*.toml` files of `dir` in lexical order of their names (none when
/// the directory does not exist).
fn list_drop_ins(dir: &Path) -> Result<Vec<PathBuf>, ConfigError> {
    let read_err = |source| ConfigError::Read {
        path: format!("{} (drop-in directory)", dir.display()),
        source,
    };
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(read_err(e)),
    };
    let mut files = Vec::new();
    for entry in entries {
        let entry = entry.map_err(read_err)?;
        let name = entry.file_name();
        let bytes = name.as_encoded_bytes();
        if bytes.ends_with(b".toml") && !bytes.starts_with(b".") {
            files.push(entry.path());
        }
    }
    files.sort_by(|a, b| a.file_name().cmp(&b.file_name()));
    Ok(files)
}

/// Applies `over` (from `file`) to `base`: tables merge key by key, any
/// other value (arrays included) replaces the base's. Records the file of
/// every value it sets under `prefix`.
fn merge(
    base: &mut toml::Table,
    over: toml::Table,
    file: &Path,
    prefix: &str,
    origins: &mut Origins,
) {
    for (key, value) in over {
        let path = format!("{prefix}{key}");
        match (base.get_mut(&key), value) {
            (Some(toml::Value::Table(b)), toml::Value::Table(o)) => {
                merge(b, o, file, &format!("{path}."), origins);
            }
            (_, toml::Value::Table(o)) => {
                let mut fresh = toml::Table::new();
                merge(&mut fresh, o, file, &format!("{path}."), origins);
                base.insert(key, toml::Value::Table(fresh));
            }
            (_, value) => {
                // A replaced array's old entries no longer apply.
                origins.retain(|k, _| !k.starts_with(&format!("{path}[")));
                origins.insert(path, file.to_path_buf());
                base.insert(key, value);
            }
        }
    }
}

/// The key an error of [`RadardConfig::validate`] is about: the text
/// between `config: ` and the next `: ` (`source.slots`, `sink[1].address`).
fn error_key(e: &ConfigError) -> Option<String> {
    let msg = e.to_string();
    let rest = msg.strip_prefix("config: ").unwrap_or(&msg);
    let (key, _) = rest.split_once(": ")?;
    let is_key = !key.is_empty()
        && key
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || "_.[]".contains(c));
    is_key.then(|| key.to_string())
}

/// Names the file(s) that set the key of a validation error: the key's own
/// value or the array or table holding it, else every file that set a key
/// inside it (`geometry`). An error about a key no file set (a built-in
/// default that no longer fits another key) is returned as it is.
fn attribute(e: ConfigError, origins: &Origins) -> ConfigError {
    let Some(key) = error_key(&e) else {
        return e;
    };
    let mut probe = key.as_str();
    let found = loop {
        if let Some(file) = origins.get(probe) {
            break vec![file.clone()];
        }
        match probe.rfind(['.', '[']) {
            Some(i) => probe = &probe[..i],
            None => break Vec::new(),
        }
    };
    let mut files = found;
    if files.is_empty() {
        for (k, f) in origins {
            if k.starts_with(&format!("{key}.")) && !files.contains(f) {
                files.push(f.clone());
            }
        }
    }
    if files.is_empty() {
        return e;
    }
    ConfigError::InFile {
        files: files
            .iter()
            .map(|f| f.display().to_string())
            .collect::<Vec<_>>()
            .join(", "),
        inner: Box::new(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A scratch directory of its own for each test.
    fn scratch(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("radard-files-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("scratch");
        dir
    }

    fn write(path: &Path, text: &str) {
        std::fs::create_dir_all(path.parent().expect("parent")).expect("dir");
        std::fs::write(path, text).expect("write");
    }

    #[test]
    fn the_base_file_is_the_command_line_then_the_environment_then_the_default() {
        let dir = scratch("choice");
        let (a, b) = (dir.join("a.toml"), dir.join("b.toml"));
        write(&a, "");
        write(&b, "");
        let s = ConfigSources::locate(Some(&a), Some(b.as_os_str())).expect("cli");
        assert_eq!(
            (s.base.as_path(), s.chosen_by),
            (a.as_path(), BaseChoice::CommandLine)
        );
        let s = ConfigSources::locate(None, Some(b.as_os_str())).expect("env");
        assert_eq!(
            (s.base.as_path(), s.chosen_by),
            (b.as_path(), BaseChoice::Environment)
        );
        let s = ConfigSources::locate(None, Some(OsStr::new(""))).expect("empty env");
        assert_eq!(s.chosen_by, BaseChoice::Default);
        assert_eq!(s.base, Path::new(DEFAULT_CONFIG_PATH));
        assert_eq!(s.drop_in_dir, Path::new("/etc/radard/radard.toml.d"));
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// An absent file named by --config or RADARD_CONFIG is an error naming
    /// it; an absent default is the built-in defaults.
    #[test]
    fn only_the_default_base_file_may_be_absent() {
        let dir = scratch("absent");
        let gone = dir.join("gone.toml");
        for (cli, env) in [(Some(gone.as_path()), None), (None, Some(gone.as_os_str()))] {
            let err = ConfigSources::locate(cli, env)
                .expect_err("absent")
                .to_string();
            assert!(
                err.contains("gone.toml") && err.contains("No such file"),
                "{err}"
            );
        }
        let s = ConfigSources {
            base: gone.clone(),
            chosen_by: BaseChoice::Default,
            base_found: false,
            drop_in_dir: dir.join("gone.toml.d"),
            drop_ins: Vec::new(),
        };
        assert_eq!(s.load().expect("defaults"), RadardConfig::default());
        assert!(
            s.header().contains("gone.toml: not found"),
            "{}",
            s.header()
        );
        assert!(s.summary_line().contains("built-in defaults"));
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn drop_ins_apply_in_lexical_order_key_by_key() {
        let dir = scratch("order");
        let base = dir.join("radard.toml");
        write(
            &base,
            "[source]\nslots = 6\nscene_seed = 7\n[output]\nprint_every = 5\n",
        );
        let d = dir.join("radard.toml.d");
        write(&d.join("20-later.toml"), "[source]\nslots = 8\n");
        write(
            &d.join("10-first.toml"),
            "[source]\nslots = 3\nscene_frames = 2\n",
        );
        // Not drop-ins: another suffix, a hidden file.
        write(&d.join("30-notes.txt"), "[source]\nslots = 99\n");
        write(&d.join(".40-hidden.toml"), "[source]\nslots = 99\n");
        let s = ConfigSources::locate(Some(&base), None).expect("locate");
        let names: Vec<_> = s
            .drop_ins
            .iter()
            .map(|p| p.file_name().expect("name"))
            .collect();
        assert_eq!(names, ["10-first.toml", "20-later.toml"]);
        let cfg = s.load().expect("load");
        assert_eq!(cfg.source.slots, 8, "the last drop-in wins");
        assert_eq!(
            cfg.source.scene_frames, 2,
            "an earlier drop-in's other key stays"
        );
        assert_eq!(
            cfg.source.scene_seed, 7,
            "the base's other key in the table stays"
        );
        assert_eq!(cfg.output.print_every, 5, "a table no drop-in names stays");
        let h = s.header();
        assert!(h.contains("radard.toml (base file, by --config)"), "{h}");
        assert!(h.find("10-first.toml").expect("named") < h.find("20-later.toml").expect("named"));
        assert!(h.lines().all(|l| l.starts_with('#')), "comments only: {h}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// Arrays, `[[sink]]` tables included, are replaced whole by a drop-in
    /// that names them; `sink = []` removes the base's sinks.
    #[test]
    fn a_drop_in_array_replaces_the_base_array() {
        let dir = scratch("arrays");
        let base = dir.join("radard.toml");
        write(
            &base,
            "[health]\ncommand = [\"/bin/a\", \"x\"]\n\
             [[sink]]\nkind = \"jsonl\"\npath = \"/tmp/a.jsonl\"\n\
             [[sink]]\nkind = \"udp\"\naddress = \"127.0.0.1:5005\"\n",
        );
        let cfg = ConfigSources::locate(Some(&base), None)
            .and_then(|s| s.load())
            .expect("base");
        assert_eq!(cfg.sinks.len(), 2);
        let d = dir.join("radard.toml.d");
        write(
            &d.join("50-site.toml"),
            "[health]\ncommand = [\"/bin/b\"]\n[[sink]]\nkind = \"udp\"\naddress = \"10.0.0.2:6000\"\n",
        );
        let cfg = ConfigSources::locate(Some(&base), None)
            .and_then(|s| s.load())
            .expect("merged");
        assert_eq!(cfg.health.command, ["/bin/b"]);
        assert_eq!(cfg.sinks.len(), 1, "{:?}", cfg.sinks);
        assert_eq!(cfg.sinks[0].kind(), super::super::SinkKind::Udp);
        write(&d.join("60-none.toml"), "sink = []\n");
        let cfg = ConfigSources::locate(Some(&base), None)
            .and_then(|s| s.load())
            .expect("none");
        assert!(cfg.sinks.is_empty());
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// Errors name the file: a drop-in's syntax or unknown key by its name
    /// and line, a value the merged configuration refuses by the key and
    /// the file that set it.
    #[test]
    fn errors_name_the_file_and_the_key() {
        let dir = scratch("errors");
        let base = dir.join("radard.toml");
        write(
            &base,
            "[source]\nslots = 4\n[[sink]]\nkind = \"jsonl\"\npath = \"/tmp/d.jsonl\"\n",
        );
        let d = dir.join("radard.toml.d");
        let cases = [
            ("[source\n", "10-bad.toml", "line 1"),
            ("[source]\nslot = 4\n", "10-bad.toml", "slot"),
            (
                "[source]\nslots = 1\n",
                "10-bad.toml: config: source.slots",
                "too few",
            ),
            (
                "[[sink]]\nkind = \"udp\"\naddress = \"nohost\"\n",
                "10-bad.toml: config: sink[0].address",
                "",
            ),
            (
                "[rt]\npriority = 200\n",
                "10-bad.toml: config: rt.priority",
                "",
            ),
            (
                "[geometry]\nn_samples = 100\n",
                "10-bad.toml: config: geometry.n_samples",
                "",
            ),
        ];
        for (text, want, also) in cases {
            write(&d.join("10-bad.toml"), text);
            let err = ConfigSources::locate(Some(&base), None)
                .and_then(|s| s.load())
                .expect_err(text)
                .to_string();
            assert!(
                err.contains(want) && err.contains(also),
                "{text:?} gave {err:?}"
            );
        }
        // The base file's own bad value names the base file.
        std::fs::remove_dir_all(&d).expect("rm");
        write(&base, "[source]\nslots = 1\n");
        let err = ConfigSources::locate(Some(&base), None)
            .and_then(|s| s.load())
            .expect_err("slots")
            .to_string();
        assert!(
            err.starts_with(&format!("{}: config: source.slots", base.display())),
            "{err}"
        );
        // A drop-in directory that cannot be read is named.
        write(&base, "");
        write(&d, "a file, not a directory");
        let err = ConfigSources::locate(Some(&base), None)
            .expect_err("not a dir")
            .to_string();
        assert!(err.contains("radard.toml.d (drop-in directory)"), "{err}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
