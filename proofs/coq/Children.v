(* The safe variant of OB-MODEL-1 in which the n children of one admission are
   written one per step while the check stays open (specs/overshoot-bound.md):
   a check that admits keeps its place (`cc_left = Some n`), then writes one
   child per step (c_p += 1) and closes when none is left; others act in
   between, and finishes happen at any time.  OB-BOUND-1 holds for it too, for
   every N, M and W: `children_bound`.

   The proof is Bound.v's with one change: what a reader credits a slot with is
   the check's *potential* there, the most that check can still add to its
   slot -- min n M before it decides, the children left after it admitted --
   and while the check a reader saw is still open, slot plus potential stays
   within the value read plus the credit. *)

From Coq Require Import Arith Bool Lia.
From Queueref Require Import Model.
From Queueref Require Bound.

Record ccheck := mk_cc { cc_n : nat; cc_next : nat; cc_view : nat; cc_left : option nat }.

Record cstate := mk_cs { cslots : nat -> nat; cchecks : nat -> option ccheck }.

Definition cinit : cstate := mk_cs (fun _ => 0) (fun _ => None).

Inductive caction : Type :=
| CStart (p n : nat) | CRead (p : nat) | CDecide (p : nat)
| CWrite (p : nat) | CClose (p : nat) | CFinish (p : nat).

Definition set_check (s : cstate) (p : nat) (c : option ccheck) : cstate :=
  mk_cs (cslots s) (upd (cchecks s) p c).

Definition add_slot (s : cstate) (p : nat) (v : nat) : cstate :=
  mk_cs (upd (cslots s) p v) (cchecks s).

(* One child written: the slot grows by one, one child fewer is left. *)
Definition after_write (s : cstate) (p : nat) (c : ccheck) (r : nat) : cstate :=
  set_check (add_slot s p (cslots s p + 1)) p
    (Some (mk_cc (cc_n c) (cc_next c) (cc_view c) (Some r))).

Section Steps.
  Variables N M W : nat.

  Inductive cstep : cstate -> caction -> cstate -> Prop :=
  | cstep_start : forall s p n,
      p < N -> 1 <= n -> n <= W -> cchecks s p = None ->
      cstep s (CStart p n) (set_check s p (Some (mk_cc n first_slot 0 None)))
  | cstep_read : forall s p c,
      p < N -> cchecks s p = Some c -> cc_next c < N -> cc_left c = None ->
      cstep s (CRead p)
        (set_check s p (Some (mk_cc (cc_n c) (next_slot (cc_next c))
                                 (accumulate (cc_view c) (cslots s (cc_next c))) None)))
  | cstep_admit : forall s p c,
      p < N -> cchecks s p = Some c -> N <= cc_next c -> cc_left c = None ->
      admits M (cc_view c) (cc_n c) = true ->
      cstep s (CDecide p)
        (set_check s p (Some (mk_cc (cc_n c) (cc_next c) (cc_view c) (Some (cc_n c)))))
  | cstep_reject : forall s p c,
      p < N -> cchecks s p = Some c -> N <= cc_next c -> cc_left c = None ->
      admits M (cc_view c) (cc_n c) = false ->
      cstep s (CDecide p) (set_check s p None)
  | cstep_write : forall s p c r,
      p < N -> cchecks s p = Some c -> cc_left c = Some (S r) ->
      cstep s (CWrite p) (after_write s p c r)
  | cstep_close : forall s p c,
      p < N -> cchecks s p = Some c -> cc_left c = Some 0 ->
      cstep s (CClose p) (set_check s p None)
  | cstep_finish : forall s p,
      p < N -> 0 < cslots s p ->
      cstep s (CFinish p) (add_slot s p (finished (cslots s p))).

  Inductive creachable : cstate -> Prop :=
  | creach_init : creachable cinit
  | creach_step : forall s a s', creachable s -> cstep s a s' -> creachable s'.
End Steps.

(* ------------------------------------------------------------------ *)
(* Ghost state: as in Bound.v *)

Record gstate := mk_g {
  real : cstate; G : nat; rank : nat -> nat;
  rd : nat -> nat -> nat; sn : nat -> nat -> nat; cr : nat -> nat -> nat;
  RL : nat; L : nat; nL : nat; ld : nat -> nat; sl : nat -> nat; al : nat -> nat
}.

Definition ginit : gstate :=
  mk_g cinit 1 (fun _ => 0) (fun _ _ => 0) (fun _ _ => 0) (fun _ _ => 0)
    0 0 0 (fun _ => 0) (fun _ => 0) (fun _ => 0).

(* The most a check can still add to its own slot. *)
Definition pot (M : nat) (c : ccheck) : nat :=
  match cc_left c with None => Nat.min (cc_n c) M | Some r => r end.

Definition seen_rank (s : cstate) (rk : nat -> nat) (q : nat) : nat :=
  match cchecks s q with Some _ => rk q | None => 0 end.

Definition credit (M : nat) (s : cstate) (q : nat) : nat :=
  match cchecks s q with Some c => pot M c | None => 0 end.

Definition with_real (g : gstate) (s' : cstate) : gstate :=
  mk_g s' (G g) (rank g) (rd g) (sn g) (cr g) (RL g) (L g) (nL g) (ld g) (sl g) (al g).

Definition gnext (M : nat) (g : gstate) (a : caction) (s' : cstate) : gstate :=
  let s := real g in
  match a with
  | CStart p _ =>
      mk_g s' (S (G g)) (upd (rank g) p (G g)) (rd g) (sn g) (cr g)
        (RL g) (L g) (nL g) (ld g) (sl g) (al g)
  | CRead p =>
      match cchecks s p with
      | Some c =>
          let q := cc_next c in
          mk_g s' (G g) (rank g)
            (Bound.upd2 (rd g) p q (cslots s q))
            (Bound.upd2 (sn g) p q (seen_rank s (rank g) q))
            (Bound.upd2 (cr g) p q (credit M s q))
            (RL g) (L g) (nL g) (ld g) (sl g) (al g)
      | None => with_real g s'
      end
  | CDecide p =>
      match cchecks s p with
      | Some c =>
          if admits M (cc_view c) (cc_n c) && (RL g <? rank g p) then
            mk_g s' (G g) (rank g) (rd g) (sn g) (cr g)
              (rank g p) p (cc_n c) (rd g p) (sn g p) (cr g p)
          else with_real g s'
      | None => with_real g s'
      end
  | _ => with_real g s'
  end.

Definition drift (M : nat) (s : cstate) (rk : nat -> nat) (q r sq a R : nat) : Prop :=
  match cchecks s q with
  | Some c =>
      if rk q =? sq then cslots s q + pot M c <= r + a
      else cslots s q <= r + a /\ R < rk q
  | None => cslots s q <= r + a
  end.

Definition fresh (N M W : nat) (g : gstate) (x : nat) (c : ccheck) : Prop :=
  cc_left c = None /\ cc_next c <= N /\ cc_view c = sum (rd g x) (cc_next c) /\
  (x < cc_next c -> cr g x x = Nat.min (cc_n c) M) /\
  forall q, q < cc_next c ->
    sn g x q < G g /\ cr g x q <= Nat.min M W /\
    drift M (real g) (rank g) q (rd g x q) (sn g x q) (cr g x q) (rank g x).

Record inv (N M W : nat) (g : gstate) : Prop := {
  i_weight : forall p c, p < N -> cchecks (real g) p = Some c ->
    1 <= cc_n c <= W /\ (forall r, cc_left c = Some r -> r <= cc_n c <= M);
  i_rank : forall p c, p < N -> cchecks (real g) p = Some c -> 1 <= rank g p < G g;
  i_distinct : forall p q cp cq, p < N -> q < N -> p <> q ->
    cchecks (real g) p = Some cp -> cchecks (real g) q = Some cq -> rank g p <> rank g q;
  i_atRL : forall p c, p < N -> cchecks (real g) p = Some c -> rank g p = RL g ->
    cc_left c <> None /\ sl g p = RL g;
  i_RL : RL g < G g;
  i_L : 0 < N -> L g < N;
  i_sum : sum (ld g) N + nL g <= M;
  i_al : forall j, j < N -> j <> L g -> al g j <= Nat.min M W;
  i_alL : al g (L g) = nL g;
  i_sl : forall j, j < N -> sl g j < G g;
  i_lead : forall j, j < N -> drift M (real g) (rank g) j (ld g j) (sl g j) (al g j) (RL g);
  i_stale : forall x c, x < N -> cchecks (real g) x = Some c -> rank g x < RL g ->
    sl g x = rank g x;
  i_fresh : forall x c, x < N -> cchecks (real g) x = Some c -> RL g < rank g x ->
    fresh N M W g x c
}.

Lemma inv_init : forall N M W, inv N M W ginit.
Proof.
  intros N M W; split; simpl; try discriminate; try lia.
  - rewrite Bound.sum_zero; lia.
  - intros j _; unfold drift; simpl; lia.
Qed.

(* ------------------------------------------------------------------ *)
(* Steps that change one server's check and not its potential, nor any slot *)

Lemma drift_same_pot : forall M s s' rk q r sq a R,
  cslots s' q = cslots s q ->
  option_map (pot M) (cchecks s' q) = option_map (pot M) (cchecks s q) ->
  drift M s rk q r sq a R -> drift M s' rk q r sq a R.
Proof.
  intros M s s' rk q r sq a R Hs Hc. unfold drift. rewrite Hs.
  destruct (cchecks s' q) as [c'|]; destruct (cchecks s q) as [c|]; simpl in Hc;
    try discriminate; [|trivial].
  injection Hc as Hp. rewrite Hp. trivial.
Qed.

(* A check that ends, or a slot that goes down, keeps every bound. *)
Lemma drift_release : forall M s s' rk q r sq a R,
  cslots s' q <= cslots s q ->
  (cchecks s' q = None \/ cchecks s' q = cchecks s q) ->
  drift M s rk q r sq a R -> drift M s' rk q r sq a R.
Proof.
  intros M s s' rk q r sq a R Hs [Hc|Hc] Hd; unfold drift in *; rewrite Hc;
    [|destruct (cchecks s q) as [c|]; [destruct (rk q =? sq)|]]; try lia.
  destruct (cchecks s q) as [c|]; [destruct (rk q =? sq)|]; lia.
Qed.

Ltac simpl_g := cbn [real G rank rd sn cr RL L nL ld sl al cslots cchecks
                      cc_n cc_next cc_view cc_left gnext with_real set_check add_slot] in *.

(* The frame of a step of p: which checks exist elsewhere is unchanged. *)
Lemma busy_frame : forall (s : cstate) p o q d,
  upd (cchecks s) p o q = Some d -> (q = p /\ o = Some d) \/ (q <> p /\ cchecks s q = Some d).
Proof.
  intros s p o q d H. unfold upd in H. destruct (Nat.eqb_spec q p); [left|right]; auto.
Qed.

(* A step of p that ends p's check, or changes only its phase and keeps its
   potential, with no slot raised and the ghost kept: close, reject, and the
   admission of a check that is not the newest. *)
Lemma inv_quiet : forall N M W g p o,
  inv N M W g -> p < N ->
  (forall d, o = Some d -> exists c, cchecks (real g) p = Some c /\ cc_n d = cc_n c /\
     pot M d = pot M c /\ rank g p <= RL g /\ cc_left d <> None /\
     (forall r, cc_left d = Some r -> r <= cc_n d <= M)) ->
  inv N M W (with_real g (set_check (real g) p o)).
Proof.
  intros N M W g p o H Hp Ho. destruct H.
  set (s' := set_check (real g) p o).
  assert (Hold : forall q d, cchecks s' q = Some d -> exists c, cchecks (real g) q = Some c /\
                 cc_n d = cc_n c /\ (q <> p -> d = c)).
  { intros q d Hd. destruct (busy_frame (real g) p o q d Hd) as [(-> & ->)|(Hne & Hq)].
    - destruct (Ho d eq_refl) as (c & Hc & Hn & _). exists c. split; [exact Hc|].
      split; [exact Hn|]. intros; contradiction.
    - exists d. auto. }
  assert (Hkeep : forall q r sq a R, drift M (real g) (rank g) q r sq a R ->
                  drift M s' (rank g) q r sq a R).
  { intros q r sq a R Hd. unfold s', set_check.
    destruct (Nat.eq_dec q p) as [->|Hne].
    - destruct o as [d|].
      + destruct (Ho d eq_refl) as (c & Hc & _ & Hpot & _).
        apply drift_same_pot with (real g); [reflexivity| |exact Hd].
        cbn [cchecks]. rewrite Bound.upd_same, Hc. simpl. rewrite Hpot. reflexivity.
      + apply drift_release with (real g); [cbn; lia| |exact Hd].
        left. cbn [cchecks]. apply Bound.upd_same.
    - apply drift_same_pot with (real g); [reflexivity| |exact Hd].
      cbn [cchecks]. rewrite Bound.upd_other by exact Hne. reflexivity. }
  split; simpl_g.
  - intros q d Hq Hd. destruct (busy_frame (real g) p o q d Hd) as [(-> & ->)|(_ & Hq')].
    + destruct (Ho d eq_refl) as (c & Hc & Hn & _ & _ & _ & Hleft).
      split; [rewrite Hn; apply (i_weight0 p c Hp Hc)|exact Hleft].
    + eauto.
  - intros q d Hq Hd. destruct (Hold q d Hd) as (c & Hc & _). eauto.
  - intros p1 p2 d1 d2 H1 H2 Hne Hd1 Hd2.
    destruct (Hold p1 d1 Hd1) as (c1 & Hc1 & _). destruct (Hold p2 d2 Hd2) as (c2 & Hc2 & _).
    eauto.
  - intros q d Hq Hd Hr. destruct (busy_frame (real g) p o q d Hd) as [(-> & ->)|(_ & Hq')].
    + destruct (Ho d eq_refl) as (c & Hc & _ & _ & _ & Hl & _).
      split; [exact Hl|]. exact (proj2 (i_atRL0 p c Hp Hc Hr)).
    + eauto.
  - exact i_RL0.
  - exact i_L0.
  - exact i_sum0.
  - exact i_al0.
  - exact i_alL0.
  - exact i_sl0.
  - intros j Hj. apply Hkeep, i_lead0, Hj.
  - intros x d Hx Hd Hlt. destruct (Hold x d Hd) as (c & Hc & _). eauto.
  - intros x d Hx Hd Hfr. destruct (busy_frame (real g) p o x d Hd) as [(-> & ->)|(Hne & Hd0)].
    + destruct (Ho d eq_refl) as (c & _ & _ & _ & Hle & _). lia.
    + destruct (i_fresh0 x d Hx Hd0 Hfr) as (Hl0 & Hk & Hv & Hown & Hq).
      split; [exact Hl0|]. split; [exact Hk|]. split; [exact Hv|]. split; [exact Hown|].
      intros q Hq'. destruct (Hq q Hq') as (Hs & Hcr & Hdr).
      split; [exact Hs|]. split; [exact Hcr|]. apply Hkeep, Hdr.
Qed.

Lemma inv_start : forall N M W g p n,
  inv N M W g -> p < N -> 1 <= n -> n <= W -> cchecks (real g) p = None ->
  inv N M W (gnext M g (CStart p n) (set_check (real g) p (Some (mk_cc n first_slot 0 None)))).
Proof.
  intros N M W g p n H Hp Hn HW Hc. destruct H.
  split; simpl_g; unfold upd.
  - intros p' c Hp' Hc'. destruct (Nat.eqb_spec p' p).
    + injection Hc' as <-; simpl. split; [lia|discriminate].
    + eauto.
  - intros p' c Hp' Hc'. destruct (Nat.eqb_spec p' p).
    + lia.
    + specialize (i_rank0 p' c Hp' Hc'); lia.
  - intros p1 p2 c1 c2 H1 H2 Hne Hc1 Hc2.
    destruct (Nat.eqb_spec p1 p); destruct (Nat.eqb_spec p2 p); subst; try lia.
    + specialize (i_rank0 p2 c2 H2 Hc2); lia.
    + specialize (i_rank0 p1 c1 H1 Hc1); lia.
    + eauto.
  - intros p' c Hp' Hc' Hr. destruct (Nat.eqb_spec p' p); [lia|eauto].
  - lia.
  - exact i_L0.
  - exact i_sum0.
  - exact i_al0.
  - exact i_alL0.
  - intros j Hj; specialize (i_sl0 j Hj); lia.
  - intros j Hj. specialize (i_lead0 j Hj). unfold drift in *; simpl_g; unfold upd.
    destruct (Nat.eqb_spec j p).
    + subst. rewrite Hc in i_lead0. specialize (i_sl0 p Hj).
      destruct (Nat.eqb_spec (G g) (sl g p)); [lia|]. lia.
    + exact i_lead0.
  - intros x c Hx Hc'. destruct (Nat.eqb_spec x p); [lia|eauto].
  - intros x c Hx Hc' Hfr. destruct (Nat.eqb_spec x p).
    + injection Hc' as <-. unfold fresh; simpl_g; unfold first_slot.
      split; [reflexivity|]. split; [lia|]. split; [reflexivity|]. split; intros; lia.
    + destruct (i_fresh0 x c Hx Hc' Hfr) as (Hl & Hk & Hv & Hown & Hq). unfold fresh; simpl_g.
      split; [exact Hl|]. split; [exact Hk|]. split; [exact Hv|].
      split; [exact Hown|].
      intros q Hq'. destruct (Hq q Hq') as (Hs & Hcr & Hd). split; [lia|]. split; [exact Hcr|].
      unfold drift in *; simpl_g; unfold upd. rewrite (proj2 (Nat.eqb_neq x p) n0).
      destruct (Nat.eqb_spec q p).
      * subst. rewrite Hc in Hd. destruct (Nat.eqb_spec (G g) (sn g x p)); [lia|].
        specialize (i_rank0 x c Hx Hc'). lia.
      * exact Hd.
Qed.

Lemma inv_read : forall N M W g p c,
  inv N M W g -> p < N -> cchecks (real g) p = Some c -> cc_next c < N -> cc_left c = None ->
  inv N M W (gnext M g (CRead p)
    (set_check (real g) p (Some (mk_cc (cc_n c) (next_slot (cc_next c))
       (accumulate (cc_view c) (cslots (real g) (cc_next c))) None)))).
Proof.
  intros N M W g p c H Hp Hc Hk Hl. destruct H.
  unfold gnext. rewrite Hc. unfold set_check.
  set (c' := mk_cc (cc_n c) (next_slot (cc_next c))
               (accumulate (cc_view c) (cslots (real g) (cc_next c))) None).
  assert (Hshape : forall q, option_map (pot M) (upd (cchecks (real g)) p (Some c') q)
                             = option_map (pot M) (cchecks (real g) q)).
  { intros q; unfold upd. destruct (Nat.eqb_spec q p); [subst; rewrite Hc|]; [|reflexivity].
    simpl. unfold pot. cbn [cc_left cc_n c']. rewrite Hl. reflexivity. }
  assert (Hsome : forall q d, upd (cchecks (real g)) p (Some c') q = Some d ->
                  exists d0, cchecks (real g) q = Some d0 /\ cc_n d0 = cc_n d /\
                             cc_left d0 = cc_left d).
  { intros q d Hq; unfold upd in Hq. destruct (Nat.eqb_spec q p).
    - subst. injection Hq as <-. exists c. split; [exact Hc|]. split; [reflexivity|exact Hl].
    - exists d. split; [exact Hq|]. split; reflexivity. }
  split; simpl_g.
  - intros p' d Hp' Hd. destruct (Hsome p' d Hd) as (d0 & Hd0 & Hn & Hl0).
    rewrite <- Hn, <- Hl0; eauto.
  - intros p' d Hp' Hd. destruct (Hsome p' d Hd) as (d0 & Hd0 & _). eauto.
  - intros p1 p2 d1 d2 H1 H2 Hne Hd1 Hd2.
    destruct (Hsome p1 d1 Hd1) as (e1 & He1 & _). destruct (Hsome p2 d2 Hd2) as (e2 & He2 & _).
    eauto.
  - intros p' d Hp' Hd Hr. destruct (Hsome p' d Hd) as (d0 & Hd0 & _ & Hl0).
    rewrite <- Hl0. eauto.
  - exact i_RL0.
  - exact i_L0.
  - exact i_sum0.
  - exact i_al0.
  - exact i_alL0.
  - exact i_sl0.
  - intros j Hj. apply drift_same_pot with (real g); [reflexivity|apply Hshape|auto].
  - intros x d Hx Hd. destruct (Hsome x d Hd) as (d0 & Hd0 & _). eauto.
  - intros x d Hx Hd Hfr. unfold fresh; simpl_g.
    destruct (Nat.eqb_spec x p).
    + subst x. unfold upd in Hd. rewrite Nat.eqb_refl in Hd. injection Hd as <-.
      destruct (i_fresh0 p c Hp Hc Hfr) as (_ & _ & Hv & Hown & Hq).
      unfold c'; simpl_g. unfold next_slot, accumulate.
      split; [reflexivity|]. split; [lia|]. split; [|split].
      * rewrite !Bound.upd2_same. cbn [sum]. rewrite Bound.sum_upd_out by lia.
        unfold upd; rewrite Nat.eqb_refl. lia.
      * intros Hpk. rewrite Bound.upd2_same. unfold upd.
        destruct (Nat.eqb_spec p (cc_next c)).
        -- unfold credit. rewrite <- e, Hc. unfold pot. rewrite Hl. reflexivity.
        -- apply Hown. lia.
      * intros q Hq'. rewrite !Bound.upd2_same. unfold upd at 1 2 3.
        destruct (Nat.eqb_spec q (cc_next c)).
        -- subst q. unfold seen_rank, credit. split; [|split].
           ++ destruct (cchecks (real g) (cc_next c)) eqn:Hq0; [|lia].
              specialize (i_rank0 _ _ Hk Hq0); lia.
           ++ destruct (cchecks (real g) (cc_next c)) eqn:Hq0; [|lia].
              destruct (i_weight0 _ _ Hk Hq0) as (Hw & Hleft). unfold pot.
              destruct (cc_left c0) eqn:Hl0; [specialize (Hleft n eq_refl)|]; lia.
           ++ unfold drift; cbn [cslots cchecks]. unfold upd.
              destruct (Nat.eqb_spec (cc_next c) p).
              ** rewrite e, !Nat.eqb_refl, Hc. unfold pot. cbn [cc_left cc_n]. rewrite Hl.
                 rewrite !Nat.eqb_refl. lia.
              ** destruct (cchecks (real g) (cc_next c)) eqn:Hq0; rewrite !Nat.eqb_refl; lia.
        -- rewrite (Bound.upd_other _ (rd g p) _ _ q n), (Bound.upd_other _ (sn g p) _ _ q n),
             (Bound.upd_other _ (cr g p) _ _ q n).
           destruct (Hq q ltac:(lia)) as (Hs & Hcr & Hdr). split; [exact Hs|]. split; [exact Hcr|].
           apply drift_same_pot with (real g); [reflexivity| |exact Hdr].
           apply Hshape.
    + unfold upd in Hd. destruct (Nat.eqb_spec x p); [contradiction|].
      destruct (i_fresh0 x d Hx Hd Hfr) as (Hl' & Hk' & Hv & Hown & Hq).
      rewrite !Bound.upd2_other by exact n.
      split; [exact Hl'|]. split; [exact Hk'|]. split; [exact Hv|]. split; [exact Hown|].
      intros q Hq'. destruct (Hq q Hq') as (Hs & Hcr & Hdr). split; [exact Hs|]. split; [exact Hcr|].
      apply drift_same_pot with (real g); [reflexivity|apply Hshape|exact Hdr].
Qed.

Lemma inv_admit : forall N M W g p c,
  inv N M W g -> p < N -> cchecks (real g) p = Some c -> N <= cc_next c -> cc_left c = None ->
  admits M (cc_view c) (cc_n c) = true ->
  inv N M W (gnext M g (CDecide p)
    (set_check (real g) p (Some (mk_cc (cc_n c) (cc_next c) (cc_view c) (Some (cc_n c)))))).
Proof.
  intros N M W g p c H Hp Hc Hk Hl Ha.
  assert (Hn : cc_n c <= M) by (unfold admits in Ha; apply Nat.leb_le in Ha; lia).
  set (d := mk_cc (cc_n c) (cc_next c) (cc_view c) (Some (cc_n c))).
  assert (Hpot : pot M d = pot M c) by (unfold pot; cbn; rewrite Hl; lia).
  unfold gnext. rewrite Hc, Ha. cbn [andb].
  destruct (Nat.ltb_spec (RL g) (rank g p)) as [Hfr|Hst].
  2: { (* a check that is not the newest admits: nothing but its phase changes *)
    apply inv_quiet; [exact H|exact Hp|]. intros d' Hd'. injection Hd' as <-.
    exists c. split; [exact Hc|]. split; [reflexivity|]. split; [exact Hpot|].
    split; [exact Hst|]. split; [discriminate|]. intros r Hr. cbn in Hr.
    injection Hr as <-. destruct H. unfold d; cbn [cc_n]; lia. }
  (* the newest admitted check: it becomes the leader *)
  destruct H.
  set (s' := set_check (real g) p (Some d)).
  assert (Hold : forall q e, cchecks s' q = Some e -> exists e0, cchecks (real g) q = Some e0 /\
                 cc_n e = cc_n e0 /\ (q <> p -> e = e0) /\ (q = p -> e = d)).
  { intros q e He. destruct (busy_frame (real g) p (Some d) q e He) as [(-> & Heq)|(Hne & Hq)].
    - injection Heq as <-. exists c. repeat split; auto; intros; contradiction.
    - exists e. repeat split; auto; intros; contradiction. }
  assert (Hkeep : forall q r sq a R, drift M (real g) (rank g) q r sq a R ->
                  drift M s' (rank g) q r sq a R).
  { intros q r sq a R Hd. apply drift_same_pot with (real g); [reflexivity| |exact Hd].
    unfold s', set_check; cbn [cchecks]. destruct (Nat.eq_dec q p) as [->|Hne].
    - rewrite Bound.upd_same, Hc. simpl. rewrite Hpot. reflexivity.
    - rewrite Bound.upd_other by exact Hne. reflexivity. }
  destruct (i_fresh0 p c Hp Hc Hfr) as (_ & Hk' & Hv & Hown & Hq).
  assert (Hall : cc_next c = N) by lia. rewrite Hall in Hv, Hown, Hq.
  assert (Hsame : sn g p p = rank g p).
  { destruct (Hq p Hp) as (_ & _ & Hd). unfold drift in Hd. rewrite Hc in Hd.
    destruct (Nat.eqb_spec (rank g p) (sn g p p)); lia. }
  split; cbn [real G rank rd sn cr RL L nL ld sl al].
  - intros q e Hq' He. destruct (Hold q e He) as (e0 & He0 & Hne0 & Hother & Hself).
    destruct (Nat.eq_dec q p) as [->|Hne].
    + rewrite (Hself eq_refl). cbn. split; [apply (i_weight0 p c Hp Hc)|].
      intros r Hr. injection Hr as <-. specialize (i_weight0 p c Hp Hc). lia.
    + rewrite (Hother Hne). eauto.
  - intros q e Hq' He. destruct (Hold q e He) as (e0 & He0 & _). eauto.
  - intros p1 p2 e1 e2 H1 H2 Hne He1 He2.
    destruct (Hold p1 e1 He1) as (f1 & Hf1 & _). destruct (Hold p2 e2 He2) as (f2 & Hf2 & _).
    eauto.
  - intros q e Hq' He Hr. destruct (Hold q e He) as (e0 & He0 & _ & _ & Hself).
    destruct (Nat.eq_dec q p) as [->|Hne].
    + rewrite (Hself eq_refl). split; [discriminate|exact Hsame].
    + exfalso. exact (i_distinct0 q p e0 c Hq' Hp Hne He0 Hc Hr).
  - exact (proj2 (i_rank0 p c Hp Hc)).
  - intros; exact Hp.
  - unfold admits in Ha. apply Nat.leb_le in Ha. lia.
  - intros j Hj Hne. exact (proj1 (proj2 (Hq j Hj))).
  - rewrite (Hown Hp). lia.
  - intros j Hj. exact (proj1 (Hq j Hj)).
  - intros j Hj. destruct (Hq j Hj) as (_ & _ & Hd). apply Hkeep, Hd.
  - intros x e Hx He Hlt. destruct (Hold x e He) as (e0 & He0 & _ & Hother & _).
    destruct (Nat.eq_dec x p) as [->|Hne]; [lia|].
    destruct (Hq x Hx) as (_ & _ & Hdr). unfold drift in Hdr. rewrite He0 in Hdr.
    destruct (Nat.eqb_spec (rank g x) (sn g p x)); lia.
  - intros x e Hx He Hlt. destruct (Hold x e He) as (e0 & He0 & _ & Hother & _).
    destruct (Nat.eq_dec x p) as [->|Hne]; [lia|]. rewrite (Hother Hne).
    destruct (i_fresh0 x e0 Hx He0 ltac:(lia)) as (Hlx & Hkx & Hvx & Hownx & Hqx).
    split; [exact Hlx|]. split; [exact Hkx|]. split; [exact Hvx|]. split; [exact Hownx|].
    intros q Hq'. destruct (Hqx q Hq') as (Hs & Hcr & Hdr).
    split; [exact Hs|]. split; [exact Hcr|]. apply Hkeep, Hdr.
Qed.

Lemma inv_write : forall N M W g p c r,
  inv N M W g -> p < N -> cchecks (real g) p = Some c -> cc_left c = Some (S r) ->
  inv N M W (gnext M g (CWrite p) (after_write (real g) p c r)).
Proof.
  intros N M W g p c r H Hp Hc Hl. destruct H. cbn [gnext].
  set (d := mk_cc (cc_n c) (cc_next c) (cc_view c) (Some r)).
  set (s' := after_write (real g) p c r).
  assert (Hnotfresh : rank g p <= RL g).
  { destruct (Nat.le_gt_cases (rank g p) (RL g)) as [|Hfr]; [assumption|].
    destruct (i_fresh0 p c Hp Hc Hfr) as (Hn & _). congruence. }
  assert (Hseen : sl g p = rank g p).
  { destruct (Nat.lt_ge_cases (rank g p) (RL g)) as [Hlt|Hge]; [eauto|].
    exact (eq_trans (proj2 (i_atRL0 p c Hp Hc ltac:(lia))) (eq_sym (Nat.le_antisymm _ _ Hnotfresh Hge))). }
  (* the write adds exactly one child to p's slot *)
  assert (Hs_p : cslots s' p = cslots (real g) p + 1).
  { unfold s', after_write, set_check, add_slot; cbn [cslots]. rewrite Bound.upd_same. lia. }
  assert (Hc_p : cchecks s' p = Some d) by apply Bound.upd_same.
  assert (Hs_o : forall q, q <> p -> cslots s' q = cslots (real g) q)
    by (intros; apply Bound.upd_other; assumption).
  assert (Hc_o : forall q, q <> p -> cchecks s' q = cchecks (real g) q)
    by (intros; apply Bound.upd_other; assumption).
  assert (Hold : forall q e, cchecks s' q = Some e -> exists e0, cchecks (real g) q = Some e0 /\
                 cc_n e = cc_n e0 /\ (q <> p -> e = e0)).
  { intros q e He. destruct (Nat.eq_dec q p) as [->|Hne].
    - rewrite Hc_p in He. injection He as <-. exists c. repeat split; auto. intros; contradiction.
    - rewrite Hc_o in He by exact Hne. exists e. auto. }
  (* p's own slot: a reader that saw p's check sees one more child written, one fewer left *)
  assert (Hgrow : forall rv sq a R, drift M (real g) (rank g) p rv sq a R ->
                  (rank g p = sq -> drift M s' (rank g) p rv sq a R) /\
                  (rank g p <> sq -> R < rank g p)).
  { intros rv sq a R Hd. unfold drift in Hd |- *. rewrite Hc in Hd. rewrite Hc_p, Hs_p.
    unfold pot in Hd |- *. rewrite Hl in Hd. cbn [cc_left d].
    destruct (Nat.eqb_spec (rank g p) sq); split; intros; try lia. }
  assert (Hkeep : forall q rv sq a R, q <> p -> drift M (real g) (rank g) q rv sq a R ->
                  drift M s' (rank g) q rv sq a R).
  { intros q rv sq a R Hne Hd. apply drift_same_pot with (real g); [auto| |exact Hd].
    rewrite Hc_o by exact Hne. reflexivity. }
  unfold with_real. split; cbn [real G rank rd sn cr RL L nL ld sl al].
  - intros q e Hq He. destruct (Nat.eq_dec q p) as [->|Hne].
    + rewrite Hc_p in He. injection He as <-. cbn [cc_n cc_left].
      destruct (i_weight0 p c Hp Hc) as (Hw & Hleft). specialize (Hleft _ Hl).
      split; [exact Hw|]. intros r' Hr'. injection Hr' as <-. unfold d; cbn [cc_n]; lia.
    + rewrite Hc_o in He by exact Hne. eauto.
  - intros q e Hq He. destruct (Hold q e He) as (e0 & He0 & _). eauto.
  - intros p1 p2 e1 e2 H1 H2 Hne He1 He2.
    destruct (Hold p1 e1 He1) as (f1 & Hf1 & _). destruct (Hold p2 e2 He2) as (f2 & Hf2 & _).
    eauto.
  - intros q e Hq He Hr. destruct (Nat.eq_dec q p) as [->|Hne].
    + rewrite Hc_p in He. injection He as <-. split; [discriminate|].
      exact (proj2 (i_atRL0 p c Hp Hc Hr)).
    + rewrite Hc_o in He by exact Hne. eauto.
  - exact i_RL0.
  - exact i_L0.
  - exact i_sum0.
  - exact i_al0.
  - exact i_alL0.
  - exact i_sl0.
  - intros j Hj. destruct (Nat.eq_dec j p) as [->|Hne].
    + destruct (Hgrow _ _ _ _ (i_lead0 p Hp)) as (Hg & _). apply Hg. congruence.
    + apply Hkeep; auto.
  - intros x e Hx He Hlt. destruct (Hold x e He) as (e0 & He0 & _). eauto.
  - intros x e Hx He Hfr. destruct (Nat.eq_dec x p) as [->|Hne]; [lia|].
    rewrite Hc_o in He by exact Hne.
    destruct (i_fresh0 x e Hx He Hfr) as (Hlx & Hkx & Hvx & Hownx & Hqx).
    split; [exact Hlx|]. split; [exact Hkx|]. split; [exact Hvx|]. split; [exact Hownx|].
    intros q Hq'. destruct (Hqx q Hq') as (Hs & Hcr & Hdr).
    split; [exact Hs|]. split; [exact Hcr|].
    destruct (Nat.eq_dec q p) as [->|Hqp].
    + destruct (Hgrow _ _ _ _ Hdr) as (Hg & Hlt').
      destruct (Nat.eq_dec (rank g p) (sn g x p)) as [Heq|Hneq]; [apply Hg, Heq|].
      specialize (Hlt' Hneq). lia.
    + apply Hkeep; assumption.
Qed.

Lemma inv_finish : forall N M W g p,
  inv N M W g -> p < N -> 0 < cslots (real g) p ->
  inv N M W (gnext M g (CFinish p) (add_slot (real g) p (finished (cslots (real g) p)))).
Proof.
  intros N M W g p H Hp Hpos. destruct H. cbn [gnext].
  set (s' := add_slot (real g) p (finished (cslots (real g) p))).
  assert (Hkeep : forall q r sq a R, drift M (real g) (rank g) q r sq a R ->
                  drift M s' (rank g) q r sq a R).
  { intros q r sq a R Hd. apply drift_release with (real g); [|right; reflexivity|exact Hd].
    unfold s', add_slot; cbn [cslots]. unfold upd, finished.
    destruct (Nat.eqb_spec q p); subst; lia. }
  unfold with_real. split; cbn [real G rank rd sn cr RL L nL ld sl al].
  - exact i_weight0.
  - exact i_rank0.
  - exact i_distinct0.
  - exact i_atRL0.
  - exact i_RL0.
  - exact i_L0.
  - exact i_sum0.
  - exact i_al0.
  - exact i_alL0.
  - exact i_sl0.
  - intros j Hj. apply Hkeep, i_lead0, Hj.
  - exact i_stale0.
  - intros x d Hx Hd Hfr.
    destruct (i_fresh0 x d Hx Hd Hfr) as (Hlx & Hkx & Hvx & Hownx & Hqx).
    split; [exact Hlx|]. split; [exact Hkx|]. split; [exact Hvx|]. split; [exact Hownx|].
    intros q Hq'. destruct (Hqx q Hq') as (Hs & Hcr & Hdr).
    split; [exact Hs|]. split; [exact Hcr|]. apply Hkeep, Hdr.
Qed.

Lemma inv_step : forall N M W g a s',
  inv N M W g -> cstep N M W (real g) a s' -> inv N M W (gnext M g a s').
Proof.
  intros N M W g a s' H Hs. inversion Hs; subst.
  - apply inv_start; assumption.
  - apply inv_read; assumption.
  - apply inv_admit; assumption.
  - cbn [gnext]. rewrite H1, H4. cbn [andb].
    apply inv_quiet; [exact H|exact H0|discriminate].
  - apply (inv_write N M W g p c r); assumption.
  - cbn [gnext]. apply inv_quiet; [exact H|exact H0|discriminate].
  - apply inv_finish; assumption.
Qed.

Lemma gnext_real : forall N M W g a s',
  cstep N M W (real g) a s' -> real (gnext M g a s') = s'.
Proof.
  intros N M W g a s' Hs. inversion Hs; subst; cbn [gnext]; try reflexivity;
    match goal with Hc : cchecks _ _ = Some _ |- _ => rewrite Hc end;
    try reflexivity; destruct (_ && _); reflexivity.
Qed.

Lemma ghost_erasure : forall N M W s,
  creachable N M W s -> exists g, real g = s /\ inv N M W g.
Proof.
  intros N M W s Hr. induction Hr as [|s a s' Hr IH Hs].
  - exists ginit. split; [reflexivity|apply inv_init].
  - destruct IH as (g & <- & Hi). exists (gnext M g a s'). split.
    + exact (gnext_real N M W g a s' Hs).
    + exact (inv_step N M W g a s' Hi Hs).
Qed.

(* OB-BOUND-1 for the children-one-per-step variant, for every N, M and W. *)
Theorem children_bound : forall N M W s,
  creachable N M W s -> sum (cslots s) N <= M + (N - 1) * Nat.min M W.
Proof.
  intros N M W s Hr. destruct (ghost_erasure N M W s Hr) as (g & <- & H). destruct H.
  destruct N as [|N']; [cbn; lia|].
  assert (Hle : sum (cslots (real g)) (S N') <= sum (fun j => ld g j + al g j) (S N')).
  { apply Bound.sum_le. intros j Hj. specialize (i_lead0 j Hj). unfold drift in i_lead0.
    destruct (cchecks (real g) j); [destruct (rank g j =? sl g j)|]; lia. }
  rewrite Bound.sum_plus in Hle.
  pose proof (Bound.sum_one_out (al g) (Nat.min M W) (L g) (S N')
                ltac:(specialize (i_L0 ltac:(lia)); lia) i_al0) as Hal.
  lia.
Qed.
