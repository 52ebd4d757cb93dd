//! The JSON the read-only subcommands write: one value per line, with the spacing the
//! contract's examples show (`{"lsn": 4, "len": 7}`).

use std::io;

pub(crate) fn json_or_null(value: Option<u64>) -> String {
    value.map_or_else(|| "null".to_string(), |value| value.to_string())
}

/// Prints `value` as one line of JSON.
pub(crate) fn print_json(value: &impl serde::Serialize) {
    println!("{}", json_line(value));
}

/// `value` as one line of JSON spaced as the contract shows it and as these commands always
/// wrote it (`{"lsn": 4, "len": 7}`), so that scripts matching the text keep working.
pub(crate) fn json_line(value: &impl serde::Serialize) -> String {
    let mut serializer = serde_json::Serializer::with_formatter(Vec::new(), SpacedLine);
    value
        .serialize(&mut serializer)
        .expect("the CLI's JSON structs serialize");
    String::from_utf8(serializer.into_inner()).expect("serde_json writes UTF-8")
}

/// The `", "` before every member or element but the first.
fn separator<W: ?Sized + io::Write>(writer: &mut W, first: bool) -> io::Result<()> {
    if first {
        Ok(())
    } else {
        writer.write_all(b", ")
    }
}

/// serde_json's compact formatter with a space after each `:` and `,`, on one line.
struct SpacedLine;

impl serde_json::ser::Formatter for SpacedLine {
    fn begin_object_key<W: ?Sized + io::Write>(
        &mut self,
        writer: &mut W,
        first: bool,
    ) -> io::Result<()> {
        separator(writer, first)
    }

    fn begin_object_value<W: ?Sized + io::Write>(&mut self, writer: &mut W) -> io::Result<()> {
        writer.write_all(b": ")
    }

    fn begin_array_value<W: ?Sized + io::Write>(
        &mut self,
        writer: &mut W,
        first: bool,
    ) -> io::Result<()> {
        separator(writer, first)
    }
}
