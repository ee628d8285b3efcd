"""harness.driver_is_current: a C++ driver is rebuilt when its source or any header of the
repository it includes is newer than the binary, and only then."""

import os

import harness


def write(path, text, mtime):
    with open(path, "w", encoding="utf-8") as out:
        out.write(text)
    os.utime(path, (mtime, mtime))


def test_a_driver_is_current_only_when_newer_than_its_source_and_local_headers(tmp_path):
    source = tmp_path / "driver.cc"
    header = tmp_path / "shared.h"
    binary = tmp_path / "driver"
    write(source, '#include <vector>\n#include "shared.h"\n  #include "tkrzw_dbm_poly.h"\nint main() {}\n', 100)
    write(header, "// shared\n", 100)
    assert not harness.driver_is_current(str(binary), str(source)), "no binary yet"
    write(binary, "", 200)
    # A quoted include that is not beside the source (a library's header) does not count.
    assert harness.driver_is_current(str(binary), str(source))
    os.utime(header, (300, 300))
    assert not harness.driver_is_current(str(binary), str(source)), "a newer included header"
    os.utime(header, (100, 100))
    os.utime(source, (300, 300))
    assert not harness.driver_is_current(str(binary), str(source)), "a newer source"
    os.utime(source, (100, 100))
    write(tmp_path / "unused.h", "", 300)
    assert harness.driver_is_current(str(binary), str(source)), "a header the source does not include"
