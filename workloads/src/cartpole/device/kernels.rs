//! CartPole's CUDA kernels (`cartpole.cu`: its env step, a stepping benchmark's many steps,
//! and the whole rollout step of `--inference graph`), with a prelude of the env's
//! constants written from `hotlab_env::cartpole`, so the kernels step the same env as the
//! host's batch env, to rounding.

use hotlab_env::cartpole as cp;
use hotlab_train::cuda::nvrtc::Source;

/// `cartpole.cu` after its prelude of the env's constants.
pub fn source() -> Source {
    let f = |name: &str, v: f64| format!("#define {name} {:?}f\n", v as f32);
    let mut s = String::from("// CartPole's constants, written by hotlab from hotlab_env::cartpole.\n");
    s += &f("G", cp::GRAVITY);
    s += &f("MP", cp::MASS_POLE);
    s += &f("TM", cp::TOTAL_MASS);
    s += &f("L", cp::LENGTH);
    s += &f("PML", cp::POLE_MASS_LENGTH);
    s += &f("FORCE", cp::FORCE_MAG);
    s += &f("T", cp::TAU);
    s += &f("X_T", cp::X_THRESHOLD);
    s += &f("THETA_T", cp::THETA_THRESHOLD);
    s += &f("RESET_B", cp::RESET_BOUND);
    s += &f("TWO_OVER_PI", std::f64::consts::FRAC_2_PI);
    s += &format!("#define MAX_STEPS {}\n", cp::MAX_STEPS);
    Source {
        name: "cartpole.cu",
        text: s + include_str!("cartpole.cu"),
        kernels: &["cartpole_step", "cartpole_multistep", "rollout_step"],
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hotlab_train::cuda::nvrtc;

    #[test]
    fn the_prelude_carries_the_envs_constants_and_every_kernel_compiles() {
        let src = source();
        assert!(src.text.contains("#define MAX_STEPS 500\n"));
        assert!(src.text.contains(&format!("#define TM {:?}f\n", cp::TOTAL_MASS as f32)));
        assert!(nvrtc::available(), "libnvrtc.so.13 must load here (the torch wheel's CUDA libraries)");
        for arch in nvrtc::CHECK_ARCHS {
            let c = nvrtc::compile(arch, 256, std::slice::from_ref(&src)).unwrap_or_else(|e| panic!("{e}"));
            for k in src.kernels {
                assert!(c.ptx.to_src().contains(&format!(".entry {k}(")), "{arch}: {k}");
            }
        }
    }
}
