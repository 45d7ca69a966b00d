"""The fields of Core ML's ``Model.proto``/``FeatureTypes.proto`` and ``MIL.proto`` the ML
program interpreter reads (field numbers from coremltools 9.0's protos), as schemas for
``protobuf.decode``."""

from __future__ import annotations

from .protobuf import Field as F
from .protobuf import message

# ---- MIL.proto ----------------------------------------------------------------------------

DIMENSION = message(f1=F("constant", "message", schema=message(f1=F("size", "int"))),
                    f2=F("unknown", "message", schema=message(f1=F("variadic", "bool"))))
TENSOR_TYPE = message(f1=F("dataType", "int"), f2=F("rank", "sint64"),
                      f3=F("dimensions", "message", True, DIMENSION))
VALUE_TYPE: dict = {}
VALUE_TYPE.update(message(
    f1=F("tensorType", "message", schema=TENSOR_TYPE),
    f2=F("listType", "message", schema=message(f1=F("type", "message", schema=VALUE_TYPE),
                                               f2=F("length", "message", schema=DIMENSION))),
    f3=F("tupleType", "message", schema=message(f1=F("types", "message", True, VALUE_TYPE))),
    f5=F("stateType", "message", schema=message(f1=F("wrappedType", "message",
                                                     schema=VALUE_TYPE)))))
NAMED_VALUE_TYPE = message(f1=F("name", "string"), f2=F("type", "message", schema=VALUE_TYPE))


def _repeated(kind: str) -> dict:
    return message(f1=F("values", kind, True))


TENSOR_VALUE = message(
    f1=F("floats", "message", schema=_repeated("float")),
    f2=F("ints", "message", schema=_repeated("sint64")),
    f3=F("bools", "message", schema=_repeated("bool")),
    f4=F("strings", "message", schema=_repeated("string")),
    f5=F("longInts", "message", schema=_repeated("sint64")),
    f6=F("doubles", "message", schema=_repeated("double")),
    f7=F("bytes", "message", schema=message(f1=F("values", "bytes"))))
VALUE: dict = {}
_VALUES = message(f1=F("values", "message", True, VALUE))
VALUE.update(message(
    f1=F("docString", "string"), f2=F("type", "message", schema=VALUE_TYPE),
    f3=F("immediateValue", "message", schema=message(
        f1=F("tensor", "message", schema=TENSOR_VALUE),
        f2=F("tuple", "message", schema=_VALUES), f3=F("list", "message", schema=_VALUES))),
    f5=F("blobFileValue", "message", schema=message(f1=F("fileName", "string"),
                                                    f2=F("offset", "int")))))
BINDING = message(f1=F("name", "string"), f2=F("value", "message", schema=VALUE))
ARGUMENT = message(f1=F("arguments", "message", True, BINDING))


def _entry(value: dict, kind: str = "message") -> dict:
    return message(f1=F("key", "string"), f2=F("value", kind, schema=value))


BLOCK: dict = {}
OPERATION = message(
    f1=F("type", "string"), f2=F("inputs", "map", schema=_entry(ARGUMENT)),
    f3=F("outputs", "message", True, NAMED_VALUE_TYPE), f4=F("blocks", "message", True, BLOCK),
    f5=F("attributes", "map", schema=_entry(VALUE)))
BLOCK.update(message(f1=F("inputs", "message", True, NAMED_VALUE_TYPE),
                     f2=F("outputs", "string", True),
                     f3=F("operations", "message", True, OPERATION)))
FUNCTION = message(f1=F("inputs", "message", True, NAMED_VALUE_TYPE), f2=F("opset", "string"),
                   f3=F("block_specializations", "map", schema=_entry(BLOCK)))
PROGRAM = message(f1=F("version", "int"), f2=F("functions", "map", schema=_entry(FUNCTION)))

# MIL DataType enum
MIL_DTYPES = {1: "bool", 10: "fp16", 11: "fp32", 12: "fp64", 21: "int8", 22: "int16",
              23: "int32", 24: "int64", 25: "int4", 31: "uint8", 32: "uint16", 33: "uint32",
              34: "uint64", 35: "uint4", 36: "uint2", 37: "uint1", 38: "uint6", 39: "uint3"}

# ---- Model.proto / FeatureTypes.proto -----------------------------------------------------

ARRAY_FEATURE_TYPE = message(f1=F("shape", "int", True), f2=F("dataType", "int"))
FEATURE_TYPE = message(f5=F("multiArrayType", "message", schema=ARRAY_FEATURE_TYPE),
                       f8=F("stateType", "message", schema=message(
                           f1=F("arrayType", "message", schema=ARRAY_FEATURE_TYPE))),
                       f1000=F("isOptional", "bool"))
FEATURE_DESCRIPTION = message(f1=F("name", "string"),
                              f3=F("type", "message", schema=FEATURE_TYPE))
METADATA = message(f1=F("shortDescription", "string"), f2=F("versionString", "string"),
                   f3=F("author", "string"), f4=F("license", "string"),
                   f100=F("userDefined", "map", schema=_entry(None, "string")))
MODEL_DESCRIPTION = message(f1=F("input", "message", True, FEATURE_DESCRIPTION),
                            f10=F("output", "message", True, FEATURE_DESCRIPTION),
                            f13=F("state", "message", True, FEATURE_DESCRIPTION),
                            f100=F("metadata", "message", schema=METADATA))
MODEL = message(f1=F("specificationVersion", "int"),
                f2=F("description", "message", schema=MODEL_DESCRIPTION),
                f502=F("mlProgram", "message", schema=PROGRAM))

# ArrayFeatureType.ArrayDataType
ARRAY_DTYPES = {65568: "fp32", 65600: "fp64", 131104: "int32", 131080: "int8", 65552: "fp16"}
