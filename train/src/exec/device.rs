//! Resolving `--device` to a libtorch device, with a clear error when it is absent.

use hotlab_core::run_knobs;
use hotlab_spec::{DeviceName, SpecError};
use tch::Device;

/// The libtorch device for a spec's `device` string.
pub fn resolve(name: &str) -> Result<Device, SpecError> {
    let parsed: DeviceName = name.parse().map_err(|m| SpecError::of(&run_knobs::DEVICE, m))?;
    let count = if tch::Cuda::is_available() { tch::Cuda::device_count() as usize } else { 0 };
    match parsed {
        DeviceName::Cpu => Ok(Device::Cpu),
        DeviceName::Auto if count > 0 => Ok(Device::Cuda(0)),
        DeviceName::Auto => Ok(Device::Cpu),
        DeviceName::Cuda(index) => {
            let i = index.unwrap_or(0);
            if count == 0 {
                Err(SpecError::new(
                    "device",
                    format!("'{name}' was asked for but no CUDA device is available; allowed here: cpu, auto"),
                ))
            } else if i >= count {
                Err(SpecError::new(
                    "device",
                    format!("'{name}' does not exist; allowed: cuda:0 to cuda:{}, cpu, auto", count - 1),
                ))
            } else {
                Ok(Device::Cuda(i))
            }
        }
    }
}

/// How a device is named in specs and reports.
pub fn label(device: Device) -> String {
    match device {
        Device::Cpu => "cpu".into(),
        Device::Cuda(i) => format!("cuda:{i}"),
        other => format!("{other:?}").to_lowercase(),
    }
}
