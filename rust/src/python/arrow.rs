//! Arrow across the Python boundary through the C Data Interface
//! (arrow-array's `ffi` and `ffi_stream`), without a binding crate.
//!
//! In: any object exporting `__arrow_c_array__` or `__arrow_c_stream__`
//! (the Arrow PyCapsule interface). Its buffers are taken as they are: the
//! imported arrays point into the producer's memory, which they keep alive.
//! Out: pyarrow objects built with pyarrow's `_import_from_c`, which moves
//! the exported structures: the results point into the core's buffers.
//! Neither direction copies a buffer (arrow-rs re-aligns only a buffer that
//! is misaligned for its type, which pyarrow's are not).

use std::ffi::{c_int, CStr};
use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::ffi::{from_ffi, FFI_ArrowArray, FFI_ArrowSchema};
use arrow_array::ffi_stream::{ArrowArrayStreamReader, FFI_ArrowArrayStream};
use arrow_array::{
    make_array, Array, ArrayRef, RecordBatch, RecordBatchIterator, RecordBatchOptions,
    RecordBatchReader,
};
use arrow_schema::{ArrowError, DataType, Field, FieldRef, Schema, SchemaRef};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyCapsule, PyTuple};
use pyo3::{intern, Borrowed};

const SCHEMA_CAPSULE: &CStr = c"arrow_schema";
const ARRAY_CAPSULE: &CStr = c"arrow_array";
const STREAM_CAPSULE: &CStr = c"arrow_array_stream";

fn arrow_err(err: ArrowError) -> PyErr {
    PyValueError::new_err(err.to_string())
}

/// `obj.__arrow_c_array__()` imported: the array and its field.
fn import_array(obj: &Bound<'_, PyAny>) -> PyResult<(ArrayRef, Field)> {
    let tuple = obj
        .getattr(intern!(obj.py(), "__arrow_c_array__"))?
        .call0()?;
    let tuple = tuple
        .cast_into::<PyTuple>()
        .map_err(|_| PyTypeError::new_err("Expected __arrow_c_array__ to return a tuple."))?;
    let schema = tuple.get_item(0)?.cast_into::<PyCapsule>()?;
    let array = tuple.get_item(1)?.cast_into::<PyCapsule>()?;
    let schema_ptr = schema.pointer_checked(Some(SCHEMA_CAPSULE))?;
    let array_ptr = array.pointer_checked(Some(ARRAY_CAPSULE))?;
    // SAFETY: the capsules are named as the interface says, so they hold an
    // ArrowSchema (borrowed: the capsule releases it) and an ArrowArray (moved
    // out, leaving a released one for the capsule's destructor).
    let schema = unsafe { schema_ptr.cast::<FFI_ArrowSchema>().as_ref() };
    let array = unsafe { FFI_ArrowArray::from_raw(array_ptr.cast().as_ptr()) };
    let field = Field::try_from(schema).map_err(|e| PyTypeError::new_err(e.to_string()))?;
    // SAFETY: `array` and `schema` come from the same `__arrow_c_array__`
    // call, so the array's buffers are laid out as the schema says (the
    // C Data Interface's contract with the producer); `from_ffi` validates
    // the buffers' counts and lengths against the type before use.
    let data =
        unsafe { from_ffi(array, schema) }.map_err(|e| PyTypeError::new_err(e.to_string()))?;
    Ok((make_array(data), field))
}

/// `obj.__arrow_c_stream__()` imported (not yet read).
fn import_stream(obj: &Bound<'_, PyAny>) -> PyResult<FFI_ArrowArrayStream> {
    let capsule = obj
        .getattr(intern!(obj.py(), "__arrow_c_stream__"))?
        .call0()?
        .cast_into::<PyCapsule>()?;
    let ptr = capsule.pointer_checked(Some(STREAM_CAPSULE))?;
    // SAFETY: an ArrowArrayStream, moved out (the capsule keeps a released one).
    let stream = unsafe { FFI_ArrowArrayStream::from_raw(ptr.cast().as_ptr()) };
    if stream.release.is_none() {
        return Err(PyValueError::new_err("input stream is already released"));
    }
    Ok(stream)
}

/// The stream's last error, after a call returned `code`.
fn stream_error(stream: &mut FFI_ArrowArrayStream, code: c_int) -> PyErr {
    let message = stream
        .get_last_error
        // SAFETY: a live stream; the message stays valid until its next call.
        .map(|f| unsafe { f(stream) })
        .filter(|p| !p.is_null())
        // SAFETY: non-null (filtered above), a NUL-terminated message the
        // stream owns until its next call; copied out at once.
        .map(|p| unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned())
        .unwrap_or_else(|| format!("error code {code}"));
    arrow_err(ArrowError::CDataInterface(message))
}

/// Every array of a stream of any type (the struct streams of tables
/// included), with the stream's field. `ArrowArrayStreamReader` reads
/// record batches only, so a chunked array's stream is read here.
fn read_array_stream(mut stream: FFI_ArrowArrayStream) -> PyResult<(Vec<ArrayRef>, Field)> {
    let (get_schema, get_next) = match (stream.get_schema, stream.get_next) {
        (Some(s), Some(n)) => (s, n),
        _ => return Err(PyValueError::new_err("input stream has no callbacks")),
    };
    let mut schema = FFI_ArrowSchema::empty();
    // SAFETY: a live stream (checked by `import_stream`) and an out-structure.
    let code = unsafe { get_schema(&mut stream, &mut schema) };
    if code != 0 {
        return Err(stream_error(&mut stream, code));
    }
    let field = Field::try_from(&schema).map_err(arrow_err)?;
    let mut chunks = Vec::new();
    loop {
        let mut array = FFI_ArrowArray::empty();
        // SAFETY: as above; a released array marks the end of the stream.
        let code = unsafe { get_next(&mut stream, &mut array) };
        if code != 0 {
            return Err(stream_error(&mut stream, code));
        }
        if array.is_released() {
            return Ok((chunks, field));
        }
        // SAFETY: an array the stream produced for the schema it gave
        // (`get_schema` above); `from_ffi` validates the buffers against it.
        let data = unsafe { from_ffi(array, &schema) }.map_err(arrow_err)?;
        chunks.push(make_array(data));
    }
}

/// An Arrow array argument: `__arrow_c_array__`, or a stream of arrays
/// (`__arrow_c_stream__`, a chunked array).
pub(super) struct AnyArray {
    chunks: Vec<ArrayRef>,
    field: FieldRef,
}

impl AnyArray {
    /// The chunks and their field.
    pub(super) fn into_chunks(self) -> (Vec<ArrayRef>, FieldRef) {
        (self.chunks, self.field)
    }
}

impl<'py> FromPyObject<'_, 'py> for AnyArray {
    type Error = PyErr;

    fn extract(obj: Borrowed<'_, 'py, PyAny>) -> PyResult<Self> {
        let py = obj.py();
        let (chunks, field) = if obj.hasattr(intern!(py, "__arrow_c_array__"))? {
            let (array, field) = import_array(&obj)?;
            (vec![array], field)
        } else if obj.hasattr(intern!(py, "__arrow_c_stream__"))? {
            read_array_stream(import_stream(&obj)?)?
        } else {
            return Err(PyValueError::new_err(
                "Expected object with __arrow_c_array__ or __arrow_c_stream__ method",
            ));
        };
        if let Some(c) = chunks.iter().find(|c| c.data_type() != field.data_type()) {
            return Err(PyValueError::new_err(format!(
                "a stream of {} returned a {} array",
                field.data_type(),
                c.data_type()
            )));
        }
        Ok(AnyArray {
            chunks,
            field: Arc::new(field),
        })
    }
}

/// A table argument: a record batch (`__arrow_c_array__` of a struct) or
/// a stream of them (`__arrow_c_stream__`), read by `into_reader`.
pub(super) enum AnyRecordBatch {
    Batch(RecordBatch),
    Stream(FFI_ArrowArrayStream),
}

impl AnyRecordBatch {
    pub(super) fn into_reader(self) -> PyResult<Box<dyn RecordBatchReader + Send>> {
        match self {
            Self::Batch(batch) => {
                let schema = batch.schema();
                Ok(Box::new(RecordBatchIterator::new([Ok(batch)], schema)))
            }
            Self::Stream(stream) => Ok(Box::new(
                ArrowArrayStreamReader::try_new(stream).map_err(arrow_err)?,
            )),
        }
    }
}

impl<'py> FromPyObject<'_, 'py> for AnyRecordBatch {
    type Error = PyErr;

    fn extract(obj: Borrowed<'_, 'py, PyAny>) -> PyResult<Self> {
        let py = obj.py();
        if obj.hasattr(intern!(py, "__arrow_c_array__"))? {
            let (array, field) = import_array(&obj)?;
            let DataType::Struct(fields) = field.data_type() else {
                return Err(PyValueError::new_err(format!(
                    "Unexpected data type {}",
                    field.data_type()
                )));
            };
            if array.null_count() != 0 {
                return Err(PyValueError::new_err(
                    "Cannot import a StructArray with a non-zero null count as a RecordBatch",
                ));
            }
            let schema = Schema::new(fields.clone()).with_metadata(field.metadata().clone());
            let rows = array.len();
            let columns = array.as_struct().columns().to_vec();
            let options = RecordBatchOptions::new().with_row_count(Some(rows));
            RecordBatch::try_new_with_options(Arc::new(schema), columns, &options)
                .map(Self::Batch)
                .map_err(arrow_err)
        } else if obj.hasattr(intern!(py, "__arrow_c_stream__"))? {
            import_stream(&obj).map(Self::Stream)
        } else {
            Err(PyValueError::new_err(
                "Expected object with __arrow_c_array__ or __arrow_c_stream__ method",
            ))
        }
    }
}

/// One Arrow array, in (`__arrow_c_array__`) or out (a `pyarrow.Array`).
pub(super) struct PyArray(ArrayRef);

impl PyArray {
    pub(super) fn from_array_ref(array: ArrayRef) -> Self {
        PyArray(array)
    }

    pub(super) fn array(&self) -> &ArrayRef {
        &self.0
    }
}

impl<'py> FromPyObject<'_, 'py> for PyArray {
    type Error = PyErr;

    fn extract(obj: Borrowed<'_, 'py, PyAny>) -> PyResult<Self> {
        if !obj.hasattr(intern!(obj.py(), "__arrow_c_array__"))? {
            return Err(PyValueError::new_err(
                "Expected object with __arrow_c_array__ method",
            ));
        }
        Ok(PyArray(import_array(&obj)?.0))
    }
}

/// The address of an exported structure, as pyarrow's `_import_from_c` takes it.
fn address<T>(structure: &mut T) -> usize {
    structure as *mut T as usize
}

/// `array` as a `pyarrow.Array` over the same buffers.
fn to_pyarrow_array<'py>(
    pyarrow: &Bound<'py, PyModule>,
    array: &ArrayRef,
) -> PyResult<Bound<'py, PyAny>> {
    let data = array.to_data();
    let mut ffi_array = FFI_ArrowArray::new(&data);
    let mut ffi_schema = FFI_ArrowSchema::try_from(data.data_type()).map_err(arrow_err)?;
    // pyarrow moves both structures (their drop is then a no-op) or, on
    // error, leaves them for their drop to release.
    pyarrow
        .getattr(intern!(pyarrow.py(), "Array"))?
        .call_method1(
            intern!(pyarrow.py(), "_import_from_c"),
            (address(&mut ffi_array), address(&mut ffi_schema)),
        )
}

impl<'py> IntoPyObject<'py> for PyArray {
    type Target = PyAny;
    type Output = Bound<'py, PyAny>;
    type Error = PyErr;

    fn into_pyobject(self, py: Python<'py>) -> PyResult<Self::Output> {
        to_pyarrow_array(&py.import(intern!(py, "pyarrow"))?, &self.0)
    }
}

/// Chunks of one type, out as a `pyarrow.ChunkedArray`.
pub(super) struct PyChunkedArray {
    chunks: Vec<ArrayRef>,
    field: FieldRef,
}

impl PyChunkedArray {
    pub(super) fn try_new(chunks: Vec<ArrayRef>, field: FieldRef) -> PyResult<Self> {
        if let Some(c) = chunks.iter().find(|c| c.data_type() != field.data_type()) {
            return Err(PyValueError::new_err(format!(
                "a {} chunk in a chunked array of {}",
                c.data_type(),
                field.data_type()
            )));
        }
        Ok(PyChunkedArray { chunks, field })
    }
}

impl<'py> IntoPyObject<'py> for PyChunkedArray {
    type Target = PyAny;
    type Output = Bound<'py, PyAny>;
    type Error = PyErr;

    fn into_pyobject(self, py: Python<'py>) -> PyResult<Self::Output> {
        let pyarrow = py.import(intern!(py, "pyarrow"))?;
        let mut ffi_schema =
            FFI_ArrowSchema::try_from(self.field.data_type()).map_err(arrow_err)?;
        let data_type = pyarrow
            .getattr(intern!(py, "DataType"))?
            .call_method1(intern!(py, "_import_from_c"), (address(&mut ffi_schema),))?;
        let chunks = self
            .chunks
            .iter()
            .map(|c| to_pyarrow_array(&pyarrow, c))
            .collect::<PyResult<Vec<_>>>()?;
        pyarrow.call_method1(intern!(py, "chunked_array"), (chunks, data_type))
    }
}

/// Record batches, out as a `pyarrow.Table` (through a C stream).
pub(super) struct PyTable {
    batches: Vec<RecordBatch>,
    schema: SchemaRef,
}

impl PyTable {
    pub(super) fn try_new(batches: Vec<RecordBatch>, schema: SchemaRef) -> PyResult<Self> {
        if let Some(b) = batches
            .iter()
            .find(|b| b.schema().fields() != schema.fields())
        {
            return Err(PyValueError::new_err(format!(
                "a batch of schema {} in a table of schema {}",
                b.schema(),
                schema
            )));
        }
        Ok(PyTable { batches, schema })
    }
}

impl<'py> IntoPyObject<'py> for PyTable {
    type Target = PyAny;
    type Output = Bound<'py, PyAny>;
    type Error = PyErr;

    fn into_pyobject(self, py: Python<'py>) -> PyResult<Self::Output> {
        let pyarrow = py.import(intern!(py, "pyarrow"))?;
        let reader = RecordBatchIterator::new(self.batches.into_iter().map(Ok), self.schema);
        let mut stream = FFI_ArrowArrayStream::new(Box::new(reader));
        pyarrow
            .getattr(intern!(py, "RecordBatchReader"))?
            .call_method1(intern!(py, "_import_from_c"), (address(&mut stream),))?
            .call_method0(intern!(py, "read_all"))
    }
}
