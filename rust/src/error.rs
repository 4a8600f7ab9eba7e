//! Errors of the core. Each variant maps to one Python exception class of
//! `ctxcompact.errors` (see `CoreError::class_name`), carrying where it happened.

use std::fmt;

/// Where in the input an error was found. Every field is optional because
/// not every error has every coordinate.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Location {
    pub session_id: Option<String>,
    pub message_id: Option<String>,
    pub row: Option<usize>,
    pub column: Option<&'static str>,
}

impl Location {
    pub fn column(column: &'static str) -> Self {
        Location {
            column: Some(column),
            ..Default::default()
        }
    }

    pub fn row(mut self, row: usize) -> Self {
        self.row = Some(row);
        self
    }

    pub fn session(mut self, session_id: Option<&str>) -> Self {
        self.session_id = session_id.map(str::to_owned);
        self
    }

    pub fn message(mut self, message_id: Option<&str>) -> Self {
        self.message_id = message_id.map(str::to_owned);
        self
    }
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut parts = Vec::new();
        if let Some(s) = &self.session_id {
            parts.push(format!("session {s:?}"));
        }
        if let Some(m) = &self.message_id {
            parts.push(format!("message {m:?}"));
        }
        if let Some(r) = self.row {
            parts.push(format!("row {r}"));
        }
        if let Some(c) = self.column {
            parts.push(format!("column {c:?}"));
        }
        if parts.is_empty() {
            Ok(())
        } else {
            write!(f, " ({})", parts.join(", "))
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CoreError {
    #[error("missing column {column:?}, needed by {needed_by}")]
    MissingColumn {
        column: &'static str,
        needed_by: &'static str,
    },
    #[error("column {column:?} has type {found}; expected {expected}")]
    ColumnType {
        column: &'static str,
        found: String,
        expected: &'static str,
    },
    #[error("{what}{at}")]
    NonContiguous { what: String, at: Location },
    #[error("{what} is null{at}")]
    NullValue { what: &'static str, at: Location },
    #[error("unknown {what} {value:?}{at}")]
    UnknownValue {
        what: &'static str,
        value: String,
        at: Location,
    },
    #[error("{what}{at}")]
    InconsistentMessage { what: String, at: Location },
    /// A line of an input file that cannot be read; `at.row` is its 1-based line.
    #[error("{what}")]
    Format { what: String, at: Location },
    #[error("{0}")]
    InvalidUsage(String),
    #[error("{0}")]
    Config(String),
    /// Arrow input that cannot be read (a stream that fails while it is consumed).
    #[error("{0}")]
    Dataset(String),
    /// A bug in ctxcompact (a panic caught at the boundary), never bad input.
    #[error("internal error in ctxcompact: {0}")]
    Internal(String),
    /// A file or folder the core cannot use that is not the input's fault (the
    /// folder of its temporary files full, missing or not writable): Python's
    /// own `OSError` (its `errno` picks the subclass, `FileNotFoundError`,
    /// `PermissionError`...) with `path` as its `filename`, as the README
    /// promises for files that cannot be read or written; no class of
    /// `ctxcompact.errors`, so not in `CLASS_NAMES`.
    #[error("{what}")]
    Os {
        errno: i32,
        what: String,
        path: String,
    },
}

impl CoreError {
    /// The `Os` error of an I/O error `e` about `path` (`EIO` when the error
    /// carries no OS code, such as a file cut short).
    pub fn os(e: &std::io::Error, what: String, path: String) -> CoreError {
        const EIO: i32 = 5;
        CoreError::Os {
            errno: e.raw_os_error().unwrap_or(EIO),
            what,
            path,
        }
    }

    /// The `Os` error of the input file at `path` that cannot be opened or
    /// read (missing, a folder, no permission, a failing disk...): its
    /// message is the OS's own, as Python's `open` gives it, so the Python
    /// exception reads `[Errno 21] Is a directory: '<path>'` on the native
    /// path and the Python one alike.
    pub fn unreadable(e: &std::io::Error, path: &str) -> CoreError {
        let text = e.to_string();
        let what = match e.raw_os_error() {
            // std adds " (os error N)" to the OS's message
            Some(code) => text
                .strip_suffix(&format!(" (os error {code})"))
                .unwrap_or(&text)
                .to_owned(),
            None => text,
        };
        CoreError::os(e, what, path.to_owned())
    }

    /// The `Os` error of an input at `path` that is not a regular file: a
    /// folder is `EISDIR` (Python's `IsADirectoryError`), a named pipe,
    /// socket or device `EINVAL` saying which (the words of the Python
    /// readers' `_not_read`): such an input is never opened, since opening a
    /// named pipe waits until something writes to it.
    pub fn not_regular(meta: &std::fs::Metadata, path: &str) -> CoreError {
        const EISDIR: i32 = 21;
        const EINVAL: i32 = 22;
        if meta.is_dir() {
            return CoreError::Os {
                errno: EISDIR,
                what: "Is a directory".into(),
                path: path.to_owned(),
            };
        }
        #[cfg(unix)]
        let kind = {
            use std::os::unix::fs::FileTypeExt;
            let t = meta.file_type();
            if t.is_fifo() {
                "a named pipe"
            } else if t.is_socket() {
                "a socket"
            } else {
                "a device"
            }
        };
        #[cfg(not(unix))]
        let kind = "a device";
        CoreError::Os {
            errno: EINVAL,
            what: format!("not a regular file ({kind})"),
            path: path.to_owned(),
        }
    }
}

pub type Result<T, E = CoreError> = std::result::Result<T, E>;

/// Every class name `CoreError::class_name` can return. The bindings export it
/// and `ctxcompact` checks at import that each one is a `CompactionError`
/// subclass in `ctxcompact.errors`, so a renamed class fails at import, not
/// the first time the error fires.
pub const CLASS_NAMES: &[&str] = &[
    "MissingColumnError",
    "ColumnTypeError",
    "NonContiguousError",
    "NullValueError",
    "UnknownValueError",
    "InconsistentMessageError",
    "FormatError",
    "InvalidUsageError",
    "ConfigError",
    "DatasetError",
    "InternalError",
];

impl CoreError {
    /// Name of the matching class in `ctxcompact.errors`.
    pub fn class_name(&self) -> &'static str {
        match self {
            CoreError::MissingColumn { .. } => "MissingColumnError",
            CoreError::ColumnType { .. } => "ColumnTypeError",
            CoreError::NonContiguous { .. } => "NonContiguousError",
            CoreError::NullValue { .. } => "NullValueError",
            CoreError::UnknownValue { .. } => "UnknownValueError",
            CoreError::InconsistentMessage { .. } => "InconsistentMessageError",
            CoreError::Format { .. } => "FormatError",
            CoreError::InvalidUsage(_) => "InvalidUsageError",
            CoreError::Config(_) => "ConfigError",
            CoreError::Dataset(_) => "DatasetError",
            CoreError::Internal(_) => "InternalError",
            CoreError::Os { .. } => "OSError",
        }
    }

    pub fn location(&self) -> Location {
        match self {
            CoreError::MissingColumn { column, .. } | CoreError::ColumnType { column, .. } => {
                Location::column(column)
            }
            CoreError::NonContiguous { at, .. }
            | CoreError::NullValue { at, .. }
            | CoreError::UnknownValue { at, .. }
            | CoreError::InconsistentMessage { at, .. }
            | CoreError::Format { at, .. } => at.clone(),
            CoreError::InvalidUsage(_)
            | CoreError::Config(_)
            | CoreError::Dataset(_)
            | CoreError::Internal(_)
            | CoreError::Os { .. } => Location::default(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_variant_names_a_listed_class() {
        let at = Location::default();
        let all = [
            CoreError::MissingColumn {
                column: "c",
                needed_by: "x",
            },
            CoreError::ColumnType {
                column: "c",
                found: "t".into(),
                expected: "u",
            },
            CoreError::NonContiguous {
                what: "w".into(),
                at: at.clone(),
            },
            CoreError::NullValue {
                what: "w",
                at: at.clone(),
            },
            CoreError::UnknownValue {
                what: "w",
                value: "v".into(),
                at: at.clone(),
            },
            CoreError::InconsistentMessage {
                what: "w".into(),
                at: at.clone(),
            },
            CoreError::Format {
                what: "w".into(),
                at,
            },
            CoreError::InvalidUsage("u".into()),
            CoreError::Config("c".into()),
            CoreError::Dataset("d".into()),
            CoreError::Internal("i".into()),
        ];
        let names: Vec<_> = all.iter().map(CoreError::class_name).collect();
        assert_eq!(names, CLASS_NAMES);
        // the one error that is Python's own class, not one of ctxcompact.errors
        let os = CoreError::os(&std::io::Error::other("x"), "w".into(), "/tmp".into());
        assert!(matches!(os, CoreError::Os { errno: 5, .. }));
        assert_eq!(os.class_name(), "OSError");
    }
}
