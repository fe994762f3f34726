"""Paths on local disk or gs:// handled as data: escaped before any glob, outputs that refuse to
replace what is there unless asked, and files written aside then renamed into place."""
