! paramonte: ParaMonte 1.x's Fortran interface to ParaDRAM, run by herd's DRAM sampler.
!
! An existing ParaMonte Fortran model and driver compile unchanged against this module:
!
!   use paramonte, only: IK, RK, runParaDRAM        ! the procedural interface
!   call runParaDRAM(ndim, getLogFunc, "paramonte.in")
!
!   use paramonte, only: ParaDRAM                   ! the object-oriented interface
!   type(ParaDRAM) :: pd
!   call pd%runSampler(ndim = ndim, getLogFunc = getLogFunc, inputFile = "paramonte.in")
!
! getLogFunc is an ordinary Fortran function (no bind(C), ndim passed by reference) with the
! abstract interface getLogFunc_proc; a model of another signature is a compile-time error
! ("Interface mismatch in dummy procedure"), not a crash at run time. inputFile is a path to
! a ParaMonte namelist (or herd TOML) file, or the namelist text itself; absent or blank
! means the defaults. After a run, herd_last_status() is 0 (done), 1 (the run failed; what
! was sampled is flushed) or 2 (bad input; nothing written; the reason is printed to stderr).
!
! Reference: Shahmoradi & Bagheri (2020), ParaMonte; its Fortran interface (paramonte.f90).
! Not re-entrant: one run at a time per process (herd's C interface, herd/mcmc/paradram.h).
module paramonte
  use, intrinsic :: iso_fortran_env, only: IK => int32, RK => real64
  use, intrinsic :: iso_c_binding, only: c_int32_t, c_double, c_char, c_funptr, c_funloc, c_int
  implicit none
  private
  public :: IK, RK, getLogFunc_proc, runParaDRAM, ParaDRAM, ParaDRAM_type, herd_last_status

  !> The log density: natural log of the (unnormalised) target at Point(1:ndim).
  abstract interface
    function getLogFunc_proc(ndim, Point) result(logFunc)
      import :: IK, RK
      integer(IK), intent(in) :: ndim
      real(RK), intent(in) :: Point(ndim)
      real(RK) :: logFunc
    end function getLogFunc_proc
  end interface

  !> ParaMonte's object-oriented interface: call pd%runSampler(ndim, getLogFunc, inputFile).
  type :: ParaDRAM_type
  contains
    procedure, nopass :: runSampler => runParaDRAM
  end type ParaDRAM_type

  !> ParaMonte's name for ParaDRAM_type in its examples.
  type, extends(ParaDRAM_type) :: ParaDRAM
  end type ParaDRAM

  interface
    ! void runParaDRAM(int32_t ndim, double (*getLogFunc)(int32_t, double[]), char* inputFile, int32_t len)
    subroutine herd_run_paradram_c(ndim, getLogFunc, inputFile, inputFileLen) bind(C, name="runParaDRAM")
      import :: c_int32_t, c_funptr, c_char
      integer(c_int32_t), value :: ndim
      type(c_funptr), value :: getLogFunc
      character(kind=c_char), dimension(*) :: inputFile
      integer(c_int32_t), value :: inputFileLen
    end subroutine herd_run_paradram_c

    !> Status of the last run in this process: 0 done, 1 the run failed, 2 bad input.
    function herd_last_status() result(status) bind(C, name="herd_last_status")
      import :: c_int
      integer(c_int) :: status
    end function herd_last_status
  end interface

  ! The model of the run in progress, called through log_func_c.
  procedure(getLogFunc_proc), pointer :: current_model => null()

contains

  !> Runs DRAM on getLogFunc in ndim dimensions, reading inputFile (a path, or the namelist
  !> text; absent: the defaults). Outputs as ParaMonte's, named by outputFileName. The model
  !> is called from the calling thread only. Status: herd_last_status().
  subroutine runParaDRAM(ndim, getLogFunc, inputFile)
    integer(IK), intent(in) :: ndim
    procedure(getLogFunc_proc) :: getLogFunc
    character(*), intent(in), optional :: inputFile
    character(kind=c_char), dimension(1) :: none
    current_model => getLogFunc
    if (present(inputFile)) then
      call herd_run_paradram_c(int(ndim, c_int32_t), c_funloc(log_func_c), inputFile, &
                               int(len(inputFile), c_int32_t))
    else
      none(1) = ' '
      call herd_run_paradram_c(int(ndim, c_int32_t), c_funloc(log_func_c), none, 0_c_int32_t)
    end if
    current_model => null()
  end subroutine runParaDRAM

  ! C's view of the current model: double f(int32_t ndim, double point[]).
  function log_func_c(ndim, point) result(logFunc) bind(C)
    integer(c_int32_t), value :: ndim
    real(c_double), intent(in) :: point(ndim)
    real(c_double) :: logFunc
    logFunc = current_model(int(ndim, IK), point)
  end function log_func_c

end module paramonte
