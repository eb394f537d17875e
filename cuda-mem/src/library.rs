//! Which CUDA libraries load on this machine. cudarc panics on the first
//! call into a library it cannot load, so this is asked first.

/// A CUDA library that cudarc loads at run time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Library {
    /// The driver, libcuda.
    Driver,
    /// The run-time compiler, libnvrtc.
    Nvrtc,
    /// The FFT library, libcufft.
    Cufft,
}

impl Library {
    /// Whether the library loads here (under any of the names cudarc
    /// tries). Never panics, calls no CUDA function.
    pub fn is_present(self) -> bool {
        match self {
            // SAFETY: only tries to dlopen the library by the names cudarc
            // uses; no function of it is called.
            Library::Driver => unsafe { cudarc::driver::sys::is_culib_present() },
            // SAFETY: as above.
            Library::Nvrtc => unsafe { cudarc::nvrtc::sys::is_culib_present() },
            // SAFETY: as above.
            Library::Cufft => unsafe { cudarc::cufft::sys::is_culib_present() },
        }
    }

    /// The libraries of `wanted` that do not load, in order.
    pub fn missing(wanted: &[Library]) -> Vec<Library> {
        wanted.iter().copied().filter(|l| !l.is_present()).collect()
    }

    /// Ok when every library of `wanted` loads, else which do not.
    pub fn require(wanted: &[Library]) -> Result<(), crate::CudaError> {
        let missing = Self::missing(wanted);
        if missing.is_empty() {
            Ok(())
        } else {
            Err(crate::CudaError::MissingLibraries { missing })
        }
    }

    /// "libcuda", "libnvrtc", "libcufft".
    pub fn name(self) -> &'static str {
        match self {
            Library::Driver => "libcuda",
            Library::Nvrtc => "libnvrtc",
            Library::Cufft => "libcufft",
        }
    }

    pub(crate) fn names(list: &[Library]) -> String {
        list.iter().map(|l| l.name()).collect::<Vec<_>>().join(", ")
    }

    pub(crate) fn sonames(list: &[Library]) -> String {
        list.iter()
            .map(|l| format!("{}.so", l.name()))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

impl std::fmt::Display for Library {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Asking never panics, with or without CUDA, and `require` agrees
    /// with `missing`.
    #[test]
    fn presence_is_asked_without_panicking() {
        let all = [Library::Driver, Library::Nvrtc, Library::Cufft];
        let missing = Library::missing(&all);
        println!("CUDA libraries missing here: {missing:?}");
        match Library::require(&all) {
            Ok(()) => assert!(missing.is_empty()),
            Err(crate::CudaError::MissingLibraries { missing: m }) => assert_eq!(m, missing),
            Err(e) => panic!("unexpected {e}"),
        }
        assert!(Library::require(&[]).is_ok());
    }
}
